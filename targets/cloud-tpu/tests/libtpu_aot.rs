//! Ahead-of-time compilation for a Cloud TPU topology with libtpu, on a machine without TPUs.
//!
//! Runs when `$TPU_SDK_LIBTPU` names libtpu.so (`pip install libtpu`; not redistributable, never committed);
//! otherwise prints a note and passes. libtpu is loaded with the environment that keeps it from contacting the
//! GCE metadata server (see `discover::prepare_libtpu_env`).

mod common;

use tpu_sdk_cloud_tpu::pjrt::{CompileOptions, NamedValue, Plugin};

#[test]
fn compiles_a_lowered_model_for_a_v5e_topology() {
    let Some(path) = std::env::var_os("TPU_SDK_LIBTPU").filter(|v| !v.is_empty()) else {
        eprintln!("note: TPU_SDK_LIBTPU is not set (pip install libtpu, then point it at libtpu/libtpu.so); skipping");
        return;
    };
    let p = Plugin::load(&path).unwrap();
    let (major, minor) = p.api_version();
    eprintln!("libtpu: PJRT C API {major}.{minor}, attributes {:?}", p.attributes().unwrap());
    let mlir = "func.func @main(%a: tensor<8x128xf32>, %b: tensor<128x256xf32>) -> tensor<8x256xf32> {
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0], precision = [HIGHEST, HIGHEST] : (tensor<8x128xf32>, tensor<128x256xf32>) -> tensor<8x256xf32>
  %1 = stablehlo.tanh %0 : tensor<8x256xf32>
  return %1 : tensor<8x256xf32>
}";
    let topo_opts = vec![
        ("chip_config_name".to_string(), NamedValue::String("default".into())),
        ("chips_per_host_bounds".to_string(), NamedValue::Int64List(vec![2, 2, 1])),
        ("num_slices".to_string(), NamedValue::Int64(1)),
    ];
    let (platform, devices, exe) = p.compile_for_topology("v5e:2x2", &topo_opts, mlir, &CompileOptions::default()).unwrap();
    eprintln!("compiled for {platform} with {devices} devices: {} bytes", exe.len());
    assert_eq!(platform, "tpu");
    assert_eq!(devices, 4);
    assert!(exe.len() > 1000);
}

#[test]
fn the_target_compiles_a_graph_for_named_topologies() {
    let Some(path) = std::env::var_os("TPU_SDK_LIBTPU").filter(|v| !v.is_empty()) else {
        eprintln!("note: TPU_SDK_LIBTPU is not set; skipping");
        return;
    };
    use tpu_sdk_core::ir::*;
    let mut g = Graph::new("conv_net");
    let x = g.add_input("x", DType::F32, vec![1, 3, 32, 32]);
    let w = g.add_constant("w", common::rand_f32(&[8, 3, 3, 3], 1));
    let c = g.add_value("c", DType::F32, vec![1, 8, 32, 32]);
    let conv = ConvAttrs {
        kernel_shape: vec![],
        strides: vec![],
        dilations: vec![],
        pads: vec![1, 1, 1, 1],
        auto_pad: AutoPad::NotSet,
        group: 1,
        activation: Some(Activation::Relu),
    };
    g.add_node("conv", Op::Conv(conv), vec![Some(x), Some(w)], vec![c]);
    let p = g.add_value("p", DType::F32, vec![1, 8, 1, 1]);
    g.add_node("gap", Op::GlobalAveragePool, vec![Some(c)], vec![p]);
    g.outputs.push(p);
    let t = tpu_sdk_cloud_tpu::CloudTpuTarget::with_plugin(path);
    for topo in ["v5e:1x1", "v6e:2x2", "v4:2x2x1"] {
        let a = t.compile_for_topology(&g, topo).unwrap();
        assert_eq!(a.platform, "tpu");
        assert!(a.devices >= 1 && a.executable.len() > 1000, "{topo}: {} devices, {} bytes", a.devices, a.executable.len());
    }
    let e = t.compile_for_topology(&g, "v99:nonsense").unwrap_err().to_string();
    assert!(e.contains("PJRT_TopologyDescription_Create"), "{e}");
}

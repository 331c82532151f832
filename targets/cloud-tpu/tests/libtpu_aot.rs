//! Ahead-of-time compilation for a Cloud TPU topology with libtpu, on a machine without TPUs.
//!
//! Runs when `$TPU_SDK_LIBTPU` names libtpu.so (`pip install libtpu`; not redistributable, never committed);
//! otherwise prints a note and passes. libtpu is loaded with the environment that keeps it from contacting the
//! GCE metadata server (see `discover::prepare_libtpu_env`).

mod common;

use tpu_sdk_cloud_tpu::pjrt::{CompileOptions, NamedValue, Plugin};
use tpu_sdk_test_support::oracle;

#[test]
fn compiles_a_lowered_model_for_a_v5e_topology() {
    let Some(path) = oracle::libtpu_path() else { return };
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
    let Some(path) = oracle::libtpu_path() else { return };
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

#[test]
fn compile_writes_tpu_executables_for_a_topology_with_bf16_replicas_shards_and_the_cache() {
    let Some(path) = oracle::libtpu_path() else { return };
    use tpu_sdk_core::ir::*;
    use tpu_sdk_core::target::{CloudTpuOptions, CompileOptions as Opts, Target};
    let mut g = Graph::new("mlp");
    let x = g.add_input("x", DType::F32, vec![8, 128]);
    let w1 = g.add_constant("w1", common::rand_f32(&[128, 256], 1));
    let w2 = g.add_constant("w2", common::rand_f32(&[256, 128], 2));
    let h = g.add_value("h", DType::F32, vec![8, 256]);
    g.add_node("a", Op::MatMul, vec![Some(x), Some(w1)], vec![h]);
    let r = g.add_value("r", DType::F32, vec![8, 256]);
    g.add_node("relu", Op::Unary(UnaryOp::Relu), vec![Some(h)], vec![r]);
    let y = g.add_value("y", DType::F32, vec![8, 128]);
    g.add_node("b", Op::MatMul, vec![Some(r), Some(w2)], vec![y]);
    g.outputs.push(y);
    let dir = std::env::temp_dir().join(format!("tpu-sdk-aot-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut t = tpu_sdk_cloud_tpu::CloudTpuTarget::new();
    t.cache_dir = Some(dir.join("cache"));
    let base = CloudTpuOptions { topology: Some("v5e:2x2".parse().unwrap()), plugin: Some(path.into()), ..Default::default() };
    let specs = |s: &[&str]| s.iter().map(|s| s.parse().unwrap()).collect::<Vec<_>>();
    let cases = [
        ("plain.pjrt", CloudTpuOptions { ..base.clone() }),
        ("bf16.pjrt", CloudTpuOptions { dtype: Some(DType::BF16), ..base.clone() }),
        ("replicas.pjrt", CloudTpuOptions { replicas: Some(4), ..base.clone() }),
        ("sharded.pjrt", CloudTpuOptions { shard: specs(&["auto", "parts=4"]), ..base.clone() }),
        ("gspmd.pjrt", CloudTpuOptions { shard: specs(&["auto", "parts=4", "partitioner=gspmd"]), ..base.clone() }),
        ("replicas-x-shards.pjrt", CloudTpuOptions { replicas: Some(2), shard: specs(&["auto", "parts=2"]), ..base.clone() }),
    ];
    for (name, o) in cases {
        let o = Opts { output: dir.join(name), target: o.into(), ..Opts::default() };
        let out = t.compile(g.clone(), &o).unwrap_or_else(|e| panic!("{name}: {e}"));
        eprintln!("{name}: {}", out.summary);
        assert!(out.summary.starts_with("tpu executable for v5e:2x2"), "{}", out.summary);
        assert!(std::fs::metadata(dir.join(name)).unwrap().len() > 1000);
    }
    // The same compilation again is a cache hit (keyed by topology as well).
    let o = Opts { output: dir.join("again.pjrt"), target: CloudTpuOptions { dtype: Some(DType::BF16), ..base.clone() }.into(), ..Opts::default() };
    let out = t.compile(g.clone(), &o).unwrap();
    assert!(out.summary.contains("compile cache hit"), "{}", out.summary);
    assert_eq!(std::fs::read(dir.join("again.pjrt")).unwrap(), std::fs::read(dir.join("bf16.pjrt")).unwrap());
    let o = Opts { output: dir.join("x.pjrt"), target: CloudTpuOptions { topology: Some("v5e:2x2".parse().unwrap()), replicas: Some(8), ..base }.into(), ..Opts::default() };
    let e = t.compile(g, &o).unwrap_err().to_string();
    assert!(e.contains("8 devices needed") || e.contains("(8, 1)"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

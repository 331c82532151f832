//! The `cloud-tpu` target end to end on the XLA CPU plugin: prepare/run through the `Target` trait, resident
//! weights, the compilation cache, input validation, device listing, and a missing plugin.

mod common;

use common::{assert_close, rand_f32};
use tpu_sdk_cloud_tpu::cache::CacheOutcome;
use tpu_sdk_cloud_tpu::CloudTpuTarget;
use tpu_sdk_core::ir::*;
use tpu_sdk_core::target::Target;

/// y = softmax(relu(x @ w1 + b1) @ w2), with w1 large enough to be passed as a resident argument.
fn mlp(batch: usize) -> (Graph, Tensor, Tensor, Tensor) {
    let (din, dh, dout) = (48, 40, 5);
    let w1 = rand_f32(&[din, dh], 1);
    let b1 = rand_f32(&[dh], 2);
    let w2 = rand_f32(&[dh, dout], 3);
    let mut g = Graph::new("mlp");
    let x = g.add_input("x", DType::F32, vec![batch, din]);
    let w1v = g.add_constant("w1", w1.clone());
    let b1v = g.add_constant("b1", b1.clone());
    let w2v = g.add_constant("w2", w2.clone());
    let h = g.add_value("h", DType::F32, vec![batch, dh]);
    g.add_node("fc1", Op::Gemm { alpha: 1.0, beta: 1.0, trans_a: false, trans_b: false, activation: Some(Activation::Relu) }, vec![Some(x), Some(w1v), Some(b1v)], vec![h]);
    let l = g.add_value("l", DType::F32, vec![batch, dout]);
    g.add_node("fc2", Op::MatMul, vec![Some(h), Some(w2v)], vec![l]);
    let y = g.add_value("y", DType::F32, vec![batch, dout]);
    g.add_node("sm", Op::Softmax { axis: 1 }, vec![Some(l)], vec![y]);
    g.outputs.push(y);
    (g, w1, b1, w2)
}

/// The same MLP in plain Rust (f64 accumulation).
fn mlp_reference(x: &Tensor, w1: &Tensor, b1: &Tensor, w2: &Tensor) -> Tensor {
    let (x, w1, b1, w2) = (x.as_f32().unwrap(), w1.as_f32().unwrap(), b1.as_f32().unwrap(), w2.as_f32().unwrap());
    let (din, dh, dout) = (48, 40, 5);
    let batch = x.len() / din;
    let mut out = Vec::new();
    for b in 0..batch {
        let h: Vec<f64> = (0..dh)
            .map(|j| ((0..din).map(|k| x[b * din + k] as f64 * w1[k * dh + j] as f64).sum::<f64>() + b1[j] as f64).max(0.0))
            .collect();
        let l: Vec<f64> = (0..dout).map(|j| (0..dh).map(|k| h[k] * w2[k * dout + j] as f64).sum()).collect();
        let m = l.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let s: f64 = l.iter().map(|v| (v - m).exp()).sum();
        out.extend(l.iter().map(|v| ((v - m).exp() / s) as f32));
    }
    Tensor::from_f32(vec![batch, dout], out)
}

#[test]
fn runs_a_model_through_the_target_trait_with_resident_weights() {
    let Some(plugin) = common::cpu_plugin() else { return };
    let (g, w1, b1, w2) = mlp(3);
    let target = CloudTpuTarget::with_plugin(&plugin);
    assert_eq!(target.name(), "cloud-tpu");
    let typed = target.compile(g.clone()).unwrap();
    assert_eq!(typed.resident_weights(), 1, "w1 (1920 elements) is an argument, the small ones are embedded");
    let mut exe = target.prepare(g).unwrap();
    for seed in [10, 11] {
        let x = rand_f32(&[3, 48], seed);
        let y = exe.run(std::slice::from_ref(&x)).unwrap();
        assert_close(&y[0], &mlp_reference(&x, &w1, &b1, &w2), 1e-5, 1e-6, "mlp");
    }
    // A fully embedded program computes the same.
    let mut inline = CloudTpuTarget::with_plugin(&plugin);
    inline.lower.max_inline_constant = None;
    let x = rand_f32(&[3, 48], 12);
    let a = inline.compile(mlp(3).0).unwrap();
    assert_eq!(a.resident_weights(), 0);
    assert_close(&a.execute(std::slice::from_ref(&x)).unwrap()[0], &mlp_reference(&x, &w1, &b1, &w2), 1e-5, 1e-6, "inline");
}

#[test]
fn the_compilation_cache_stores_then_loads_executables() {
    let Some(plugin) = common::cpu_plugin() else { return };
    let dir = std::env::temp_dir().join(format!("tpu-sdk-cache-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut t = CloudTpuTarget::with_plugin(&plugin);
    t.cache_dir = Some(dir.clone());
    let x = rand_f32(&[2, 48], 20);
    let first = t.compile(mlp(2).0).unwrap();
    assert_eq!(first.cache_outcome(), Some(CacheOutcome::Miss));
    let second = t.compile(mlp(2).0).unwrap();
    assert_eq!(second.cache_outcome(), Some(CacheOutcome::Hit));
    assert_eq!(first.execute(std::slice::from_ref(&x)).unwrap(), second.execute(&[x]).unwrap());
    // A different program is a different entry.
    let third = t.compile(mlp(4).0).unwrap();
    assert_eq!(third.cache_outcome(), Some(CacheOutcome::Miss));
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 2);
    // A corrupt entry is recompiled and replaced.
    for e in std::fs::read_dir(&dir).unwrap() {
        std::fs::write(e.unwrap().path(), b"garbage").unwrap();
    }
    assert_eq!(t.compile(mlp(2).0).unwrap().cache_outcome(), Some(CacheOutcome::Miss));
    assert_eq!(t.compile(mlp(2).0).unwrap().cache_outcome(), Some(CacheOutcome::Hit));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn inputs_that_do_not_match_are_rejected_with_expected_and_given() {
    let Some(plugin) = common::cpu_plugin() else { return };
    let mut exe = CloudTpuTarget::with_plugin(&plugin).prepare(mlp(2).0).unwrap();
    let e = exe.run(&[rand_f32(&[3, 48], 1)]).unwrap_err();
    assert!(matches!(e, tpu_sdk_core::Error::InputMismatch(_)), "{e:?}");
    assert!(e.to_string().contains("'x' f32[2, 48]") && e.to_string().contains("f32[3, 48]"), "{e}");
    let e = exe.run(&[]).unwrap_err();
    assert!(e.to_string().contains("takes 1 input(s)"), "{e}");
}

#[test]
fn lists_the_platform_and_devices() {
    let Some(plugin) = common::cpu_plugin() else { return };
    let info = tpu_sdk_cloud_tpu::devices(Some(&plugin)).unwrap();
    assert_eq!(info.platform, "cpu");
    assert_eq!(info.devices.len(), 4);
    assert_eq!(info.api_version.0, 0);
    assert_eq!(info.header_version, tpu_sdk_cloud_tpu::pjrt::HEADER_VERSION);
    assert!(info.attributes.iter().any(|(k, _)| k == "stablehlo_current_version"));
}

#[test]
fn a_missing_plugin_says_what_to_install() {
    let e = CloudTpuTarget::with_plugin("/nonexistent/libtpu.so").prepare(mlp(1).0).err().expect("no plugin").to_string();
    assert!(e.contains("/nonexistent/libtpu.so") && e.contains("pip install"), "{e}");
}

#[test]
fn replicated_execution_runs_one_batch_per_device() {
    let Some(plugin) = common::cpu_plugin() else { return };
    let (g, w1, b1, w2) = mlp(2);
    let mut t = CloudTpuTarget::with_plugin(&plugin);
    t.device = 1;
    let exe = t.compile_replicated(g, 3).unwrap();
    assert_eq!(exe.devices().iter().map(|d| d.id()).collect::<Vec<_>>(), vec![1, 2, 3]);
    let batches: Vec<Vec<Tensor>> = (0..3).map(|r| vec![rand_f32(&[2, 48], 30 + r)]).collect();
    let outs = exe.execute(&batches).unwrap();
    assert_eq!(outs.len(), 3);
    for (b, o) in batches.iter().zip(&outs) {
        assert_close(&o[0], &mlp_reference(&b[0], &w1, &b1, &w2), 1e-5, 1e-6, "replica");
    }
    assert!(exe.execute(&batches[..2]).unwrap_err().to_string().contains("3 replicas"));
    t.device = 2;
    let e = t.compile_replicated(mlp(2).0, 3).unwrap_err().to_string();
    assert!(e.contains("4 addressable device"), "{e}");
}

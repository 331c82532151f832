//! Values kept in device memory between calls (`Target::prepare_resident`, what generation's key/value cache
//! uses) on the real XLA CPU plugin: the linked output is written into the donated input's buffer (input/output
//! aliasing: the device address stays the same from call to call), only the other outputs come back to the
//! host, and the values move between executables without a copy.

mod common;

use tpu_sdk_cloud_tpu::{CloudTpuResident, CloudTpuTarget};
use tpu_sdk_core::ir::ops::ReduceOp;
use tpu_sdk_core::ir::{BinaryOp, DType, Graph, Op, Tensor};
use tpu_sdk_core::runtime::CpuEval;
use tpu_sdk_core::target::{ResidentExecutable, Target};

/// state [1, 4] and x [1, 4] → (sum = Σ(state + x) as [1], next = state + x); `next` feeds `state`.
fn accumulator() -> Graph {
    let mut g = Graph::new("acc");
    let s = g.add_input("state", DType::F32, vec![1, 4]);
    let x = g.add_input("x", DType::F32, vec![1, 4]);
    let next = g.add_value("next", DType::F32, vec![]);
    let sum = g.add_value("sum", DType::F32, vec![]);
    g.add_node("add", Op::Binary(BinaryOp::Add, None), vec![Some(s), Some(x)], vec![next]);
    let op = Op::Reduce { op: ReduceOp::Sum, axes: Some(vec![1]), keepdims: false, noop_with_empty_axes: false };
    g.add_node("sum", op, vec![Some(next)], vec![sum]);
    g.outputs = vec![sum, next];
    tpu_sdk_core::ir::infer::infer_graph(&mut g, &CpuEval).unwrap();
    g
}

fn row(v: f32) -> Tensor {
    Tensor::from_f32(vec![1, 4], vec![v, 2.0 * v, 3.0 * v, 4.0 * v])
}

#[test]
fn the_linked_output_stays_on_the_device_in_the_donated_buffer() {
    let Some(plugin) = common::cpu_plugin() else { return };
    let target = CloudTpuTarget::with_plugin(plugin);
    let g = accumulator();
    // output 1 (next) feeds input 0 (state)
    let mut r = CloudTpuResident::new(&target, &g, &[(1, 0)], &vec![true; g.inputs.len()]).unwrap();
    r.set_state(&[row(0.0)]).unwrap();
    let a0 = r.state_addresses().unwrap()[0].unwrap();
    let out = r.run(&[row(1.0)]).unwrap();
    assert_eq!(out.len(), 1, "only the sum comes back");
    assert_eq!(out[0].as_f32().unwrap(), &[10.0]);
    let a1 = r.state_addresses().unwrap()[0].unwrap();
    let out = r.run(&[row(2.0)]).unwrap();
    assert_eq!(out[0].as_f32().unwrap(), &[30.0], "1+2 per element: 3 + 6 + 9 + 12");
    let a2 = r.state_addresses().unwrap()[0].unwrap();
    assert_eq!((a0, a1), (a1, a2), "the aliased output must reuse the donated input's device memory");
    let t = r.transfers();
    assert_eq!((t.uploads, t.downloads, t.state_downloads), (3, 2, 0), "{t:?}");
    assert_eq!(t.download_bytes, 8, "two f32 sums");
    assert_eq!(r.state_to_host().unwrap()[0], row(3.0));
    assert_eq!(r.transfers().state_downloads, 1);

    // moved to another executable of the same shapes: no copy
    let mut other = target.prepare_resident(&g, &[(1, 0)], &vec![true; g.inputs.len()]).unwrap().expect("cloud-tpu keeps values on the device");
    other.put_state(r.take_state().unwrap()).unwrap();
    assert_eq!(other.run(&[row(1.0)]).unwrap()[0].as_f32().unwrap(), &[40.0]);
    assert_eq!(other.transfers().uploads, 1, "only x was uploaded");
    // the first one has nothing left
    let e = r.run(&[row(1.0)]).unwrap_err().to_string();
    assert!(e.contains("no value"), "{e}");
}

#[test]
fn bad_links_and_states_are_refused() {
    let Some(plugin) = common::cpu_plugin() else { return };
    let target = CloudTpuTarget::with_plugin(plugin);
    let g = accumulator();
    // the sum [] cannot reuse the state [1, 4]
    let e = CloudTpuResident::new(&target, &g, &[(0, 0)], &vec![true; g.inputs.len()]).unwrap_err().to_string();
    assert!(e.contains("types differ"), "{e}");
    let e = CloudTpuResident::new(&target, &g, &[(1, 0), (1, 1)], &vec![true; g.inputs.len()]).unwrap_err().to_string();
    assert!(e.contains("repeats"), "{e}");
    let mut r = CloudTpuResident::new(&target, &g, &[(1, 0)], &vec![true; g.inputs.len()]).unwrap();
    let e = r.set_state(&[Tensor::zeros(DType::F32, vec![2, 4])]).unwrap_err().to_string();
    assert!(e.contains("'state'"), "{e}");
    r.set_state(&[row(0.0)]).unwrap();
    let e = r.run(&[row(1.0), row(1.0)]).unwrap_err().to_string();
    assert!(e.contains("besides its resident ones") && e.contains("x"), "{e}");
}

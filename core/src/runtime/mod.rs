//! The reference CPU runtime: kernels for every op and a [`Session`] that runs a graph with memory planned
//! once. It is the default target and the numerical oracle for every other target.

mod control_flow;
mod fold;
pub mod fp_env;
pub mod kernels;
mod session;
pub(crate) mod spin_pool;

pub use fold::CpuEval;
pub use session::Session;

use crate::ir::{Graph, Tensor};
use crate::target::{Executable, Target};

/// The reference CPU target (`cpu`): runs graphs with [`Session`].
#[derive(Clone, Copy, Debug, Default)]
pub struct CpuTarget;

impl Target for CpuTarget {
    fn name(&self) -> &str {
        "cpu"
    }
    fn prepare(&self, graph: Graph) -> crate::Result<Box<dyn Executable>> {
        Ok(Box::new(Session::new(graph)?))
    }
    fn devices(&self) -> crate::Result<Vec<crate::target::DeviceInfo>> {
        let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
        Ok(vec![crate::target::DeviceInfo {
            target: "cpu".into(),
            id: "0".into(),
            kind: format!("{} CPU", std::env::consts::ARCH),
            state: "ready".into(),
            location: "host".into(),
            details: vec![("threads".into(), threads.to_string())],
        }])
    }
}

impl Executable for Session {
    fn run(&mut self, inputs: &[Tensor]) -> crate::Result<Vec<Tensor>> {
        Session::run(self, inputs)
    }
    fn run_refs(&mut self, inputs: &[&Tensor]) -> crate::Result<Vec<Tensor>> {
        Session::run_refs(self, inputs)
    }
    fn run_owned(&mut self, inputs: Vec<Tensor>) -> crate::Result<Vec<Tensor>> {
        Session::run_owned(self, inputs)
    }
}

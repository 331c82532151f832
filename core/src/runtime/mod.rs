//! The reference CPU runtime: kernels for every op and a session that runs a graph with memory planned once.

pub mod kernels;

//! Reference CPU runtime.

//! Typed access to node attributes, remembering which ones were read so that an attribute the importer does
//! not understand is reported instead of silently ignored.

use std::cell::Cell;

use super::proto::{attr_type as at, AttributeProto, TensorProto};
use crate::{Error, Result};

/// The attributes of one node.
pub struct Attrs<'a> {
    /// "node 'name' (OpType)", for messages.
    desc: String,
    list: &'a [AttributeProto],
    used: Vec<Cell<bool>>,
}

/// The effective type of an attribute: its `type` field, or (old writers leave it unset) the field that holds
/// a value.
pub fn kind(a: &AttributeProto) -> i32 {
    match a.r#type.unwrap_or(at::UNDEFINED) {
        at::UNDEFINED => {
            if a.f.is_some() {
                at::FLOAT
            } else if a.i.is_some() {
                at::INT
            } else if a.s.is_some() {
                at::STRING
            } else if a.t.is_some() {
                at::TENSOR
            } else if a.g.is_some() {
                at::GRAPH
            } else if a.sparse_tensor.is_some() {
                at::SPARSE_TENSOR
            } else if !a.floats.is_empty() {
                at::FLOATS
            } else if !a.ints.is_empty() {
                at::INTS
            } else if !a.strings.is_empty() {
                at::STRINGS
            } else if !a.tensors.is_empty() {
                at::TENSORS
            } else if !a.graphs.is_empty() {
                at::GRAPHS
            } else {
                at::UNDEFINED
            }
        }
        k => k,
    }
}

fn kind_name(k: i32) -> &'static str {
    match k {
        at::FLOAT => "a float",
        at::INT => "an int",
        at::STRING => "a string",
        at::TENSOR => "a tensor",
        at::GRAPH => "a graph",
        at::FLOATS => "a list of floats",
        at::INTS => "a list of ints",
        at::STRINGS => "a list of strings",
        at::TENSORS => "a list of tensors",
        at::GRAPHS => "a list of graphs",
        at::SPARSE_TENSOR => "a sparse tensor",
        at::SPARSE_TENSORS => "a list of sparse tensors",
        at::TYPE_PROTO => "a type",
        at::TYPE_PROTOS => "a list of types",
        _ => "of unknown type",
    }
}

impl<'a> Attrs<'a> {
    /// Wraps the attributes of the node described by `desc` ("node 'n' (Conv)").
    pub fn new(desc: String, list: &'a [AttributeProto]) -> Attrs<'a> {
        Attrs { desc, used: list.iter().map(|_| Cell::new(false)).collect(), list }
    }

    /// The node description used in messages.
    pub fn desc(&self) -> &str {
        &self.desc
    }

    /// An `InvalidModel` error about attribute `name`.
    pub fn invalid(&self, name: &str, msg: impl std::fmt::Display) -> Error {
        Error::InvalidModel(format!("{}: attribute '{name}' {msg}", self.desc))
    }

    /// An `Unsupported` error about attribute `name`.
    pub fn unsupported(&self, name: &str, msg: impl std::fmt::Display) -> Error {
        Error::Unsupported(format!("{}: attribute '{name}' {msg}", self.desc))
    }

    /// The attribute called `name`, marking it as read.
    pub fn get(&self, name: &str) -> Option<&'a AttributeProto> {
        let mut found = None;
        for (a, u) in self.list.iter().zip(&self.used) {
            if a.name.as_deref() == Some(name) {
                u.set(true);
                found = found.or(Some(a));
            }
        }
        found
    }

    /// Marks attributes as read without interpreting them (hints without effect on inference results).
    pub fn ignore(&self, names: &[&str]) {
        for n in names {
            let _ = self.get(n);
        }
    }

    fn typed(&self, name: &str, want: i32) -> Result<Option<&'a AttributeProto>> {
        match self.get(name) {
            None => Ok(None),
            Some(a) => {
                let k = kind(a);
                if k == want {
                    Ok(Some(a))
                } else {
                    Err(self.invalid(name, format!("must be {}, found {}", kind_name(want), kind_name(k))))
                }
            }
        }
    }

    /// An int attribute.
    pub fn int(&self, name: &str) -> Result<Option<i64>> {
        Ok(self.typed(name, at::INT)?.map(|a| a.i.unwrap_or(0)))
    }

    /// An int attribute with a default.
    pub fn int_or(&self, name: &str, default: i64) -> Result<i64> {
        Ok(self.int(name)?.unwrap_or(default))
    }

    /// A 0/1 int attribute as a bool.
    pub fn bool_or(&self, name: &str, default: bool) -> Result<bool> {
        match self.int(name)? {
            None => Ok(default),
            Some(0) => Ok(false),
            Some(1) => Ok(true),
            Some(v) => Err(self.invalid(name, format!("must be 0 or 1, found {v}"))),
        }
    }

    /// A non-negative int attribute as usize (sizes, counts, axes: at most `i32::MAX`, so that arithmetic on
    /// them cannot overflow).
    pub fn usize_or(&self, name: &str, default: usize) -> Result<usize> {
        match self.int(name)? {
            None => Ok(default),
            Some(v) => self.to_usize(name, v),
        }
    }

    fn to_usize(&self, name: &str, v: i64) -> Result<usize> {
        if v < 0 {
            return Err(self.invalid(name, format!("must be non-negative, found {v}")));
        }
        if v > i32::MAX as i64 {
            return Err(self.invalid(name, format!("value {v} is out of range")));
        }
        Ok(v as usize)
    }

    /// A float attribute.
    pub fn float(&self, name: &str) -> Result<Option<f32>> {
        Ok(self.typed(name, at::FLOAT)?.map(|a| a.f.unwrap_or(0.0)))
    }

    /// A float attribute with a default.
    pub fn float_or(&self, name: &str, default: f32) -> Result<f32> {
        Ok(self.float(name)?.unwrap_or(default))
    }

    /// A list-of-ints attribute.
    pub fn ints(&self, name: &str) -> Result<Option<Vec<i64>>> {
        Ok(self.typed(name, at::INTS)?.map(|a| a.ints.clone()))
    }

    /// A list of non-negative ints as usizes (empty when absent).
    pub fn usizes(&self, name: &str) -> Result<Vec<usize>> {
        let v = self.ints(name)?.unwrap_or_default();
        v.iter().map(|&x| self.to_usize(name, x)).collect()
    }

    /// A list-of-floats attribute.
    pub fn floats(&self, name: &str) -> Result<Option<Vec<f32>>> {
        Ok(self.typed(name, at::FLOATS)?.map(|a| a.floats.clone()))
    }

    /// A string attribute.
    pub fn string(&self, name: &str) -> Result<Option<String>> {
        match self.typed(name, at::STRING)? {
            None => Ok(None),
            Some(a) => {
                let b = a.s.as_deref().unwrap_or(&[]);
                String::from_utf8(b.to_vec()).map(Some).map_err(|_| self.invalid(name, "is not valid UTF-8"))
            }
        }
    }

    /// A list-of-strings attribute.
    pub fn strings(&self, name: &str) -> Result<Option<Vec<String>>> {
        match self.typed(name, at::STRINGS)? {
            None => Ok(None),
            Some(a) => a
                .strings
                .iter()
                .map(|b| String::from_utf8(b.to_vec()).map_err(|_| self.invalid(name, "is not valid UTF-8")))
                .collect::<Result<Vec<_>>>()
                .map(Some),
        }
    }

    /// A string attribute with a default.
    pub fn string_or(&self, name: &str, default: &str) -> Result<String> {
        Ok(self.string(name)?.unwrap_or_else(|| default.to_string()))
    }

    /// A tensor attribute.
    pub fn tensor(&self, name: &str) -> Result<Option<&'a TensorProto>> {
        match self.typed(name, at::TENSOR)? {
            None => Ok(None),
            Some(a) => a.t.as_ref().map(Some).ok_or_else(|| self.invalid(name, "has no tensor value")),
        }
    }

    /// Fails on the first attribute that was never read: the importer does not know what it means, so
    /// ignoring it could change the results.
    pub fn finish(&self, op_type: &str, opset: i64) -> Result<()> {
        for (a, u) in self.list.iter().zip(&self.used) {
            if !u.get() {
                let name = a.name.as_deref().unwrap_or("");
                return Err(Error::Unsupported(format!(
                    "{}: attribute '{name}' is not supported (not an attribute of {op_type} at opset {opset}, or one tpu-sdk does not implement)",
                    self.desc
                )));
            }
        }
        Ok(())
    }

    /// The first graph-valued attribute, if any (control flow).
    pub fn subgraph(&self) -> Option<&'a str> {
        self.list.iter().find(|a| matches!(kind(a), at::GRAPH | at::GRAPHS)).map(|a| a.name.as_deref().unwrap_or(""))
    }
}

//! What a decoder ONNX file takes and gives, told from its input and output names — the layout that Hugging Face
//! optimum and `torch.onnx.export` of transformers write:
//!
//! - inputs `input_ids` i64 `[batch, seq]`, `attention_mask` i64 `[batch, past+seq]`, optionally `position_ids`
//!   i64 `[batch, seq]`, and per layer `past_key_values.{i}.key` / `.value` `[batch, kv_heads, past, head_dim]`;
//! - outputs `logits` `[batch, seq, vocab]` and per layer `present.{i}.key` / `.value`;
//! - or the no-cache form: `input_ids` (and optionally `attention_mask`) → `logits`.

use std::path::Path;

use tpu_sdk_core::import::onnx::proto::ModelProto;
use tpu_sdk_core::import::DeclaredDim;

use crate::{Error, Result};

/// The key and value tensors of one layer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KvNames {
    /// `past_key_values.{i}.key` (input) or `present.{i}.key` (output).
    pub key: String,
    /// `past_key_values.{i}.value` or `present.{i}.value`.
    pub value: String,
}

/// A decoder's interface.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecoderInterface {
    /// The graph inputs in the file's order.
    pub inputs: Vec<String>,
    /// Whether it takes `attention_mask`.
    pub attention_mask: bool,
    /// Whether it takes `position_ids` (a cache form without them can only be run with exact lengths: its
    /// positions come from the cache length).
    pub position_ids: bool,
    /// Per layer, the cache inputs (empty: the no-cache form).
    pub past: Vec<KvNames>,
    /// Per layer, the cache outputs (as many as `past`).
    pub present: Vec<KvNames>,
    /// The logits output.
    pub logits: String,
    /// Key/value heads of the cache (the second dim of a past input), if the file fixes it.
    pub kv_heads: Option<usize>,
    /// Head size (the last dim of a past input), if the file fixes it.
    pub head_dim: Option<usize>,
}

impl DecoderInterface {
    /// Reads the interface of the ONNX decoder at `path` without importing its graph.
    pub fn of_file(path: &Path) -> Result<DecoderInterface> {
        let declared = tpu_sdk_core::import::onnx::declared_inputs(path)?;
        let bytes = std::fs::read(path).map_err(|source| Error::Io { path: path.display().to_string(), source })?;
        let model = <ModelProto as prost::Message>::decode(bytes.as_slice())
            .map_err(|e| Error::InvalidModel(format!("{}: not an ONNX model ({e})", path.display())))?;
        let outputs: Vec<String> = model.graph.map(|g| g.output.into_iter().filter_map(|o| o.name).collect()).unwrap_or_default();
        let inputs: Vec<(String, Option<Vec<DeclaredDim>>)> = declared.into_iter().map(|d| (d.name, d.dims)).collect();
        DecoderInterface::from_names(&inputs, &outputs).map_err(|e| match e {
            Error::Unsupported(m) => Error::Unsupported(format!("{}: {m}", path.display())),
            e => e,
        })
    }

    /// The interface from the inputs (with their declared dims) and the output names.
    pub fn from_names(inputs: &[(String, Option<Vec<DeclaredDim>>)], outputs: &[String]) -> Result<DecoderInterface> {
        const KNOWN: &str = "input_ids, attention_mask, position_ids, past_key_values.N.key|value";
        let mut past: Vec<(usize, bool, String)> = Vec::new();
        let (mut ids, mut mask, mut pos) = (false, false, false);
        let (mut kv_heads, mut head_dim) = (None, None);
        for (name, dims) in inputs {
            match name.as_str() {
                "input_ids" => ids = true,
                "attention_mask" => mask = true,
                "position_ids" => pos = true,
                n => {
                    let Some((layer, is_key)) = layer_of(n, "past_key_values.") else {
                        return Err(Error::Unsupported(format!(
                            "input '{n}' is not one a decoder takes here ({KNOWN}); `generate` runs decoder-only language models \
                             exported as Hugging Face optimum / torch.onnx.export write them"
                        )));
                    };
                    if let Some(d) = dims.as_ref().filter(|d| d.len() == 4) {
                        if let DeclaredDim::Fixed(h) = d[1] {
                            kv_heads = Some(h);
                        }
                        if let DeclaredDim::Fixed(h) = d[3] {
                            head_dim = Some(h);
                        }
                    } else if dims.is_some() {
                        return Err(Error::Unsupported(format!("cache input '{n}' is not of rank 4 [batch, kv_heads, past, head_dim]")));
                    }
                    past.push((layer, is_key, n.to_string()));
                }
            }
        }
        if !ids {
            return Err(Error::Unsupported(format!("the model has no input 'input_ids' (a decoder takes {KNOWN})")));
        }
        if !outputs.iter().any(|o| o == "logits") {
            return Err(Error::Unsupported(format!(
                "the model has no output 'logits' (outputs: {}); `generate` needs a language-model head's logits [batch, seq, vocab]",
                outputs.join(", ")
            )));
        }
        let mut present: Vec<(usize, bool, String)> = outputs.iter().filter_map(|o| layer_of(o, "present.").map(|(l, k)| (l, k, o.clone()))).collect();
        let past = pair_layers(&mut past, "past_key_values")?;
        let present = pair_layers(&mut present, "present")?;
        if past.len() != present.len() {
            return Err(Error::Unsupported(format!(
                "the model takes the cache of {} layer(s) (past_key_values.N.*) but returns {} (present.N.*): each past_key_values.N.key|value \
                 needs its present.N.key|value",
                past.len(),
                present.len()
            )));
        }
        Ok(DecoderInterface {
            inputs: inputs.iter().map(|(n, _)| n.clone()).collect(),
            attention_mask: mask,
            position_ids: pos,
            past,
            present,
            logits: "logits".into(),
            kv_heads,
            head_dim,
        })
    }

    /// Whether the model carries a key/value cache.
    pub fn has_cache(&self) -> bool {
        !self.past.is_empty()
    }
}

/// `past_key_values.3.key` → (3, true).
fn layer_of(name: &str, prefix: &str) -> Option<(usize, bool)> {
    let rest = name.strip_prefix(prefix)?;
    let (layer, kind) = rest.split_once('.')?;
    let layer: usize = layer.parse().ok()?;
    match kind {
        "key" => Some((layer, true)),
        "value" => Some((layer, false)),
        _ => None,
    }
}

/// Pairs keys with values per layer and checks that layers run 0..n without gaps.
fn pair_layers(found: &mut [(usize, bool, String)], what: &str) -> Result<Vec<KvNames>> {
    found.sort();
    let layers = found.iter().map(|f| f.0 + 1).max().unwrap_or(0);
    let mut out = Vec::with_capacity(layers);
    for l in 0..layers {
        let key = found.iter().find(|f| f.0 == l && f.1).map(|f| f.2.clone());
        let value = found.iter().find(|f| f.0 == l && !f.1).map(|f| f.2.clone());
        match (key, value) {
            (Some(key), Some(value)) => out.push(KvNames { key, value }),
            _ => return Err(Error::Unsupported(format!("{what}.{l}.key and {what}.{l}.value must both be present (layers 0..{layers})"))),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ins(names: &[&str]) -> Vec<(String, Option<Vec<DeclaredDim>>)> {
        names
            .iter()
            .map(|n| {
                let dims = n.starts_with("past").then(|| {
                    vec![DeclaredDim::Symbol("b".into()), DeclaredDim::Fixed(2), DeclaredDim::Symbol("p".into()), DeclaredDim::Fixed(16)]
                });
                (n.to_string(), dims)
            })
            .collect()
    }

    fn outs(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn reads_the_cache_and_no_cache_forms() {
        let i = DecoderInterface::from_names(
            &ins(&["input_ids", "attention_mask", "position_ids", "past_key_values.1.value", "past_key_values.0.key", "past_key_values.0.value", "past_key_values.1.key"]),
            &outs(&["logits", "present.0.key", "present.0.value", "present.1.key", "present.1.value"]),
        )
        .unwrap();
        assert_eq!(i.past.len(), 2);
        assert_eq!(i.past[1].key, "past_key_values.1.key");
        assert_eq!(i.present[0].value, "present.0.value");
        assert_eq!((i.kv_heads, i.head_dim), (Some(2), Some(16)));
        assert!(i.position_ids && i.attention_mask && i.has_cache());
        let n = DecoderInterface::from_names(&ins(&["input_ids", "attention_mask"]), &outs(&["logits"])).unwrap();
        assert!(!n.has_cache() && !n.position_ids);
    }

    #[test]
    fn refuses_what_is_not_a_decoder() {
        let e = DecoderInterface::from_names(&ins(&["pixel_values"]), &outs(&["logits"])).unwrap_err().to_string();
        assert!(e.contains("'pixel_values'") && e.contains("input_ids"), "{e}");
        let e = DecoderInterface::from_names(&ins(&["input_ids"]), &outs(&["last_hidden_state"])).unwrap_err().to_string();
        assert!(e.contains("no output 'logits'") && e.contains("last_hidden_state"), "{e}");
        let e = DecoderInterface::from_names(
            &ins(&["input_ids", "past_key_values.0.key", "past_key_values.0.value"]),
            &outs(&["logits", "present.0.key", "present.0.value", "present.1.key", "present.1.value"]),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("1 layer") && e.contains("returns 2"), "{e}");
        let e = DecoderInterface::from_names(&ins(&["input_ids", "past_key_values.0.key"]), &outs(&["logits", "present.0.key"])).unwrap_err().to_string();
        assert!(e.contains("past_key_values.0.value"), "{e}");
    }
}

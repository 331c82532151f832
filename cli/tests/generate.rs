//! `tpu-sdk generate`: decoder language models (Llama and Qwen2 architectures: grouped-query attention, RoPE,
//! RMSNorm, SwiGLU; seeded random weights) exported by `scripts/make_llm.py` with `torch.onnx.export` into
//! `cli/tests/data/llm/<arch>/`, in the cache form (`model.onnx`), the no-cache form (`model_nocache.onnx`) and,
//! for Llama, the cache form without `position_ids` (`model_nopos.onnx`); and a minGPT-style character model
//! (GPT-2 architecture: learned positions, LayerNorm, GELU; `mingpt/`, vocabulary in `chars.json`). Peers:
//! - transformers' own greedy `generate` (PyTorch, CPU), recorded by the same script in `reference.json`: our
//!   tokens must be the same, for prompts of 1, 3, 13 and 26 tokens (1, 6 and 15 characters) whose
//!   generations cross the 16 and 32 buckets;
//! - onnxruntime running the same file with the growing cache optimum uses (`scripts/ort_generate.py`): the
//!   logits of every step within 1e-4 of its magnitude;
//! - HF `tokenizers` (Python) for `--prompt`'s encoding and the decoded text.
//!
//! The cloud-tpu target (XLA CPU plugin) must give the same tokens and logits. Needs `$TPU_SDK_PYTHON`; without
//! it the peer comparisons say so and pass, unless `TPU_SDK_REQUIRE_ORACLES=1`.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use tpu_sdk::core::npy;
use tpu_sdk_test_support::cli::{self, expect, ok};
use tpu_sdk_test_support::compare::relative_to_mean;
use tpu_sdk_test_support::{fresh_dir, oracle, repo};

const BUCKETS: &str = "16,32,64";

fn tpu_sdk(args: &[&str]) -> std::process::Output {
    cli::run(env!("CARGO_BIN_EXE_tpu-sdk"), args)
}

fn data(arch: &str) -> PathBuf {
    repo().join("cli/tests/data/llm").join(arch)
}

/// (prompt, transformers' greedy tokens) of `reference.json`.
fn references(arch: &str) -> Vec<(Vec<i64>, Vec<i64>)> {
    let r: Value = serde_json::from_slice(&std::fs::read(data(arch).join("reference.json")).unwrap()).unwrap();
    let ids = |v: &Value| v.as_array().unwrap().iter().map(|x| x.as_i64().unwrap()).collect::<Vec<i64>>();
    r["greedy"].as_array().unwrap().iter().map(|g| (ids(&g["prompt"]), ids(&g["generated"]))).collect()
}

fn join(ids: &[i64]) -> String {
    ids.iter().map(|i| i.to_string()).collect::<Vec<_>>().join(",")
}

/// `generate --json` of `model` on `prompt`; (the JSON document, the logits per step).
fn generate(model: &Path, prompt: &[i64], n: usize, extra: &[&str], dir: &Path) -> (Value, tpu_sdk::Tensor) {
    let logits = dir.join("logits.npy");
    let (p, n) = (join(prompt), n.to_string());
    let mut args = vec!["generate", model.to_str().unwrap(), "--input-ids", &p, "--max-new-tokens", &n, "--buckets", BUCKETS];
    args.extend_from_slice(&["--json", "--logits-out", logits.to_str().unwrap()]);
    args.extend_from_slice(extra);
    let out = ok(tpu_sdk(&args));
    (serde_json::from_str(&out).unwrap(), npy::read(&logits).unwrap())
}

fn ids_of(doc: &Value, key: &str) -> Vec<i64> {
    doc[key].as_array().unwrap().iter().map(|x| x.as_i64().unwrap()).collect()
}

/// onnxruntime's greedy run of the same file: (tokens, logits per step).
fn onnxruntime(py: &Path, model: &Path, prompt: &[i64], n: usize, dir: &Path) -> (Vec<i64>, tpu_sdk::Tensor) {
    let logits = dir.join("ort_logits.npy");
    let o = Command::new(py)
        .arg(repo().join("scripts/ort_generate.py"))
        .arg(model)
        .args(["--input-ids", &join(prompt), "--max-new-tokens", &n.to_string(), "--logits-out"])
        .arg(&logits)
        .output()
        .unwrap();
    assert!(o.status.success(), "ort_generate.py failed: {}", String::from_utf8_lossy(&o.stderr));
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    (ids_of(&doc, "generated_ids"), npy::read(&logits).unwrap())
}

fn forms(arch: &str) -> Vec<&'static str> {
    if arch == "llama" {
        vec!["model.onnx", "model_nocache.onnx", "model_nopos.onnx"]
    } else {
        vec!["model.onnx", "model_nocache.onnx"]
    }
}

#[test]
fn greedy_tokens_equal_transformers_and_logits_equal_onnxruntime() {
    let py = oracle::python();
    let dir = fresh_dir("generate_cpu");
    for arch in ["llama", "qwen2", "mingpt"] {
        for form in forms(arch) {
            let model = data(arch).join(form);
            for (prompt, want) in references(arch) {
                let (doc, logits) = generate(&model, &prompt, want.len(), &[], &dir);
                let what = format!("{arch}/{form}, prompt of {}", prompt.len());
                assert_eq!(ids_of(&doc, "generated_ids"), want, "{what}: tokens differ from transformers' greedy generate");
                assert_eq!(ids_of(&doc, "input_ids"), prompt);
                // decode steps of the cache form with position_ids write into the cache where it is
                let bucketed = form == "model.onnx" && want.len() > 1;
                assert_eq!(doc["cache_in_place"], bucketed, "{what}: {doc}");
                if let Some(py) = &py {
                    let (ort_ids, ort_logits) = onnxruntime(py, &model, &prompt, want.len(), &dir);
                    assert_eq!(ort_ids, want, "{what}: onnxruntime itself disagrees with transformers");
                    relative_to_mean(&what, 0, &logits, &ort_logits, "onnxruntime", 1e-4).unwrap();
                }
            }
        }
    }
}

#[test]
fn programs_are_compiled_once_per_bucket() {
    // 13 prompt tokens + 24 generated: the cache passes 16 and 32 positions. One prefill program (16 tokens,
    // 16 positions) and one decode program per cache bucket (16, 32, 64).
    let dir = fresh_dir("generate_buckets");
    let (doc, _) = generate(&data("llama").join("model.onnx"), &(3..16).collect::<Vec<i64>>(), 24, &[], &dir);
    assert_eq!(doc["mode"], "bucketed");
    assert_eq!(doc["programs_compiled"], 4, "{doc}");
    assert_eq!(doc["decode_steps"], 23);
    assert!(doc["decode_tokens_per_s"].as_f64().unwrap() > 0.0 && doc["prefill_ms"].as_f64().unwrap() > 0.0);
    // the no-cache form: one program per sequence bucket (16, 32, 64)
    let (doc, _) = generate(&data("llama").join("model_nocache.onnx"), &(3..16).collect::<Vec<i64>>(), 24, &[], &dir);
    assert_eq!((doc["mode"].as_str(), doc["programs_compiled"].as_u64()), (Some("nocache"), Some(3)), "{doc}");
}

#[test]
fn sampling_with_a_seed_is_reproducible() {
    let dir = fresh_dir("generate_sampling");
    let model = data("qwen2").join("model.onnx");
    let sample = |seed: &str| {
        let (doc, _) = generate(&model, &[5, 17, 42], 24, &["--temperature", "0.9", "--top-k", "50", "--top-p", "0.95", "--seed", seed], &dir);
        ids_of(&doc, "generated_ids")
    };
    let a = sample("3");
    assert_eq!(a, sample("3"), "the same seed must give the same tokens");
    assert_ne!(a, sample("4"), "another seed gave the very same 24 tokens");
    let greedy = references("qwen2").into_iter().find(|(p, _)| p == &[5, 17, 42]).unwrap().1;
    assert_ne!(a, greedy, "sampling at temperature 0.9 gave exactly the greedy tokens");
}

#[test]
fn a_text_prompt_is_encoded_and_decoded_as_hf_tokenizers_does() {
    let Some(py) = oracle::python() else { return };
    let model = data("llama").join("model.onnx");
    let tok = data("llama").join("tokenizer.json");
    let prompt = "The quick brown fox jumps";
    let out = ok(tpu_sdk(&["generate", model.to_str().unwrap(), "--prompt", prompt, "--max-new-tokens", "12", "--buckets", BUCKETS, "--json"]));
    let doc: Value = serde_json::from_str(&out).unwrap();
    let script = "import json, sys\nfrom tokenizers import Tokenizer\nt = Tokenizer.from_file(sys.argv[1])\nd = json.loads(sys.argv[3])\n\
                  print(json.dumps({'ids': t.encode(sys.argv[2]).ids, 'text': t.decode(d['generated_ids'])}))";
    let o = Command::new(&py).args(["-c", script]).arg(&tok).arg(prompt).arg(&out).output().unwrap();
    if !o.status.success() {
        let err = String::from_utf8_lossy(&o.stderr);
        if err.contains("No module named 'tokenizers'") {
            return oracle::skip("the Python has no `tokenizers` (scripts/requirements.txt installs it)");
        }
        panic!("{err}");
    }
    let peer: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["input_ids"], peer["ids"], "prompt encoding");
    assert_eq!(doc["text"], peer["text"], "decoded text");
    // streamed (no --json): the text on stdout
    let streamed = ok(tpu_sdk(&["generate", model.to_str().unwrap(), "--prompt", prompt, "--max-new-tokens", "12", "--buckets", BUCKETS]));
    assert_eq!(streamed.trim_end_matches('\n'), peer["text"].as_str().unwrap());
}

#[cfg(feature = "cloud-tpu")]
#[test]
fn cloud_tpu_generates_the_same_tokens_and_logits() {
    if oracle::python().is_none() {
        return;
    }
    let Some(plugin) = oracle::xla_cpu_plugin_of_python() else {
        return oracle::skip("the XLA CPU plugin (fastatomstruct-xla-cpu) is not installed in $TPU_SDK_PYTHON");
    };
    let dir = fresh_dir("generate_cloud");
    let extra = ["--target", "cloud-tpu", "--plugin", plugin.to_str().unwrap()];
    for arch in ["llama", "qwen2"] {
        for form in ["model.onnx", "model_nocache.onnx"] {
            let model = data(arch).join(form);
            for (prompt, want) in references(arch).into_iter().filter(|(p, _)| p.len() == 1 || p.len() == 13) {
                let what = format!("{arch}/{form} on cloud-tpu, prompt of {}", prompt.len());
                let (cpu_doc, cpu_logits) = generate(&model, &prompt, want.len(), &[], &dir);
                let (doc, logits) = generate(&model, &prompt, want.len(), &extra, &dir);
                assert_eq!(ids_of(&doc, "generated_ids"), want, "{what}: tokens differ from transformers");
                assert_eq!(doc["programs_compiled"], cpu_doc["programs_compiled"], "{what}");
                relative_to_mean(&what, 0, &logits, &cpu_logits, "the cpu target", 1e-4).unwrap();
                assert_eq!(doc["cache_on_device"], form == "model.onnx", "{what}: {doc}");
            }
        }
    }
    // Within one bucket the cache never leaves the device: what comes back is one row of logits per step (the
    // prefill computes its LM head on the last prompt token only), nothing else. (Growing into a larger bucket moves the cache through the host.)
    let model = data("llama").join("model.onnx");
    let prompt: Vec<i64> = (3..16).collect();
    let n = 24.to_string();
    let args = ["generate", model.to_str().unwrap(), "--input-ids", &join(&prompt), "--max-new-tokens", &n, "--buckets", "64", "--json"];
    let doc: Value = serde_json::from_str(&ok(tpu_sdk(&[&args[..], &extra[..]].concat()))).unwrap();
    let t = &doc["transfers"];
    let (vocab, prefill_rows, steps) = (512, 1, doc["decode_steps"].as_u64().unwrap());
    assert_eq!(t["cache_downloads"], 0, "{doc}");
    assert_eq!(t["downloads"].as_u64().unwrap(), 1 + steps, "{doc}");
    assert_eq!(t["download_bytes"].as_u64().unwrap(), 4 * vocab * (prefill_rows + steps), "{doc}");
    assert_eq!(doc["programs_compiled"], 2, "one prefill and one decode program: {doc}");
    // bf16: the cache is stored on the device in bf16 (its initial upload is half the f32 one) and the logits
    // stay within bf16's precision of the f32 ones
    let (p16, p32) = (dir.join("bf16.npy"), dir.join("f32.npy"));
    let args16 = [&args[..], &extra[..], &["--dtype", "bf16", "--logits-out", p16.to_str().unwrap()][..]].concat();
    let doc16: Value = serde_json::from_str(&ok(tpu_sdk(&args16))).unwrap();
    let (up32, up16) = (t["upload_bytes"].as_u64().unwrap(), doc16["transfers"]["upload_bytes"].as_u64().unwrap());
    let cache_elems = 4 * 2 * 64 * 16; // key and value of 2 layers, [1, 2 kv heads, 64 positions, 16]
    assert_eq!(up32 - up16, 2 * cache_elems, "f32 {t}, bf16 {}", doc16["transfers"]);
    let args32 = [&args[..], &extra[..], &["--logits-out", p32.to_str().unwrap()][..]].concat();
    ok(tpu_sdk(&args32));
    let (l16, l32) = (npy::read(&p16).unwrap(), npy::read(&p32).unwrap());
    let first = |t: &tpu_sdk::Tensor| tpu_sdk::Tensor::from_f32(vec![512], t.as_f32().unwrap()[..512].to_vec());
    relative_to_mean("bf16 prefill logits", 0, &first(&l16), &first(&l32), "f32", 0.05).unwrap();
    let grown = generate(&model, &prompt, 24, &extra, &dir).0;
    assert_eq!(grown["transfers"]["cache_downloads"], 2 * 2 * 2, "2 layers × key and value, moved twice (16 → 32 → 64): {grown}");
}

/// Several prompts at once (one batch, left-padded): each row's tokens are transformers' greedy tokens for that
/// prompt alone, on cpu and on cloud-tpu; a row that meets the end-of-sequence token stops there while the others
/// go on.
#[test]
fn a_batch_of_prompts_gives_each_prompts_own_tokens() {
    let plugin = oracle::xla_cpu_plugin_of_python();
    let mut targets: Vec<Vec<String>> = vec![vec![]];
    match &plugin {
        Some(p) => targets.push(vec!["--target".into(), "cloud-tpu".into(), "--plugin".into(), p.to_str().unwrap().into()]),
        None => oracle::skip("the XLA CPU plugin (fastatomstruct-xla-cpu) is not installed in $TPU_SDK_PYTHON: batch on cpu only"),
    }
    for arch in ["llama", "qwen2"] {
        let model = data(arch).join("model.onnx");
        let refs = references(arch);
        let n = refs.iter().map(|(_, w)| w.len()).min().unwrap();
        let eos = refs[0].1[4]; // the 5th token of the first prompt's continuation
        for extra in &targets {
            for with_eos in [false, true] {
                let ns = n.to_string();
                let eos_s = eos.to_string();
                let prompts: Vec<String> = refs.iter().map(|(p, _)| join(p)).collect();
                let mut args = vec!["generate", model.to_str().unwrap(), "--max-new-tokens", &ns, "--buckets", BUCKETS, "--json"];
                for p in &prompts {
                    args.extend_from_slice(&["--input-ids", p]);
                }
                if with_eos {
                    args.extend_from_slice(&["--eos", &eos_s]);
                }
                args.extend(extra.iter().map(|s| s.as_str()));
                let doc: Value = serde_json::from_str(&ok(tpu_sdk(&args))).unwrap();
                let rows = doc["batch"].as_array().unwrap_or_else(|| panic!("no batch in {doc}"));
                assert_eq!(rows.len(), refs.len());
                for (row, (prompt, want)) in rows.iter().zip(&refs) {
                    let mut want = want[..n].to_vec();
                    if with_eos {
                        if let Some(k) = want.iter().position(|&t| t == eos) {
                            want.truncate(k + 1);
                        }
                    }
                    assert_eq!(ids_of(row, "input_ids"), *prompt);
                    assert_eq!(ids_of(row, "generated_ids"), want, "{arch} {extra:?} eos {with_eos}: prompt of {} tokens", prompt.len());
                }
            }
        }
    }
}

/// `--replicas N` splits a batch of prompts across N devices of the XLA CPU plugin (each device keeping its rows'
/// cache), `--shard auto` splits each replica's weights across devices (the cache replicated on each); every
/// prompt still gets transformers' greedy tokens. Three prompts on two replicas take a filler row.
#[cfg(feature = "cloud-tpu")]
#[test]
fn replicas_and_shards_generate_each_prompts_own_tokens() {
    if oracle::python().is_none() {
        return;
    }
    let Some(plugin) = oracle::xla_cpu_plugin_of_python() else {
        return oracle::skip("the XLA CPU plugin (fastatomstruct-xla-cpu) is not installed in $TPU_SDK_PYTHON");
    };
    let model = data("llama").join("model.onnx");
    let refs = references("llama");
    let n = refs.iter().map(|(_, w)| w.len()).min().unwrap();
    let ns = n.to_string();
    let base = ["--target", "cloud-tpu", "--plugin", plugin.to_str().unwrap()];
    for (layout, prompts) in [(&["--replicas", "2"][..], 3), (&["--replicas", "4"][..], 2), (&["--shard", "auto", "--shard", "parts=2"][..], 2), (&["--replicas", "2", "--shard", "auto"][..], 4)] {
        let mut args = vec!["generate", model.to_str().unwrap(), "--max-new-tokens", &ns, "--buckets", BUCKETS, "--json"];
        let ids: Vec<String> = refs.iter().take(prompts).map(|(p, _)| join(p)).collect();
        for p in &ids {
            args.extend_from_slice(&["--input-ids", p]);
        }
        args.extend_from_slice(&base);
        args.extend_from_slice(layout);
        let doc: Value = serde_json::from_str(&ok(tpu_sdk(&args))).unwrap();
        let rows = doc["batch"].as_array().map(|r| r.to_vec()).unwrap_or_else(|| vec![doc.clone()]);
        assert_eq!(rows.len(), prompts, "{layout:?}: {doc}");
        for (row, (prompt, want)) in rows.iter().zip(&refs) {
            assert_eq!(ids_of(row, "input_ids"), *prompt, "{layout:?}");
            assert_eq!(ids_of(row, "generated_ids"), want[..n], "{layout:?}: prompt of {} tokens", prompt.len());
        }
        // growing into a larger bucket moves the cache through the host: each replica's piece of each of the 4 tensors
        let replicas = if layout.contains(&"--replicas") { layout[1].parse::<u64>().unwrap() } else { 1 };
        let moves = doc["transfers"]["cache_downloads"].as_u64().unwrap();
        assert!(moves > 0 && moves % (4 * replicas) == 0, "{layout:?}: {doc}");
    }
    // within one bucket the cache never leaves the devices
    let prompt = join(&refs[2].0);
    let args = ["generate", model.to_str().unwrap(), "--max-new-tokens", &ns, "--buckets", "64", "--json", "--input-ids", &prompt, "--input-ids", &prompt];
    let doc: Value = serde_json::from_str(&ok(tpu_sdk(&[&args[..], &base[..], &["--replicas", "2", "--shard", "auto"][..]].concat()))).unwrap();
    assert_eq!(doc["transfers"]["cache_downloads"], 0, "{doc}");
    for row in doc["batch"].as_array().unwrap() {
        assert_eq!(ids_of(row, "generated_ids"), refs[2].1[..n], "{doc}");
    }
    // a no-cache model cannot split its one prompt across replicas; AOT programs are single-device
    let nocache = data("llama").join("model_nocache.onnx");
    let e = expect(tpu_sdk(&[&["generate", nocache.to_str().unwrap(), "--input-ids", "3,4", "--replicas", "2"][..], &base[..]].concat()), 3).1;
    assert!(e.contains("--replicas 2") && e.contains("position_ids"), "{e}");
    let e = expect(tpu_sdk(&["generate", model.to_str().unwrap(), "--emit-stablehlo", "--output-dir", "/nonexistent", "--shard", "auto", "--target", "cloud-tpu"]), 2).1;
    assert!(e.contains("--shard"), "{e}");
}

#[test]
fn bad_input_gets_a_clear_error() {
    let dir = fresh_dir("generate_bad");
    let model = data("llama").join("model.onnx");
    let m = model.to_str().unwrap();
    // not a decoder
    let e = expect(tpu_sdk(&["generate", "examples/models/text_direction_cls.onnx", "--input-ids", "1"]), 3).1;
    assert!(e.contains("input 'x'") && e.contains("input_ids"), "{e}");
    // a prompt longer than the largest bucket
    let long = join(&(1..40).collect::<Vec<i64>>());
    let e = expect(tpu_sdk(&["generate", m, "--input-ids", &long, "--buckets", "16,32"]), 2).1;
    assert!(e.contains("largest bucket (32)") && e.contains("--buckets"), "{e}");
    // a token outside the vocabulary, a negative one
    let e = expect(tpu_sdk(&["generate", m, "--input-ids", "3,512", "--buckets", BUCKETS]), 2).1;
    assert!(e.contains("token id 512") && e.contains("0..512"), "{e}");
    let e = expect(tpu_sdk(&["generate", m, "--input-ids", "3,-1", "--buckets", BUCKETS]), 2).1;
    assert!(e.contains("-1"), "{e}");
    // sampling values, ids that are not numbers
    let e = expect(tpu_sdk(&["generate", m, "--input-ids", "3", "--temperature", "1", "--top-p", "1.5"]), 2).1;
    assert!(e.contains("top-p"), "{e}");
    let e = expect(tpu_sdk(&["generate", m, "--input-ids", "3,x"]), 2).1;
    assert!(e.contains("--input-ids"), "{e}");
    // --prompt with no tokenizer anywhere; a tokenizer file that is not one
    let copy = dir.join("model.onnx");
    std::fs::copy(&model, &copy).unwrap();
    let e = expect(tpu_sdk(&["generate", copy.to_str().unwrap(), "--prompt", "hello"]), 2).1;
    assert!(e.contains("--tokenizer"), "{e}");
    let bad = dir.join("tokenizer.json");
    std::fs::write(&bad, b"{\"version\": ").unwrap();
    let e = expect(tpu_sdk(&["generate", m, "--prompt", "hello", "--tokenizer", bad.to_str().unwrap()]), 2).1;
    assert!(e.contains("cannot read the tokenizer"), "{e}");
    // a truncated model
    let bytes = std::fs::read(&model).unwrap();
    std::fs::write(&copy, &bytes[..bytes.len() / 3]).unwrap();
    let e = cli::fails(tpu_sdk(&["generate", copy.to_str().unwrap(), "--input-ids", "1"]));
    assert!(e.contains("model.onnx"), "{e}");
    // past and present that do not pair up (an output removed): needs onnx to edit the file
    let Some(py) = oracle::python() else { return };
    let script = "import onnx, sys\nm = onnx.load(sys.argv[1])\nkeep = [o for o in m.graph.output if not o.name.startswith('present.1.')]\n\
                  del m.graph.output[:]\nm.graph.output.extend(keep)\nonnx.save(m, sys.argv[2])";
    let st = Command::new(&py).args(["-c", script]).arg(&model).arg(&copy).status().unwrap();
    assert!(st.success());
    let e = expect(tpu_sdk(&["generate", copy.to_str().unwrap(), "--input-ids", "1"]), 3).1;
    assert!(e.contains("2 layer") && e.contains("returns 1"), "{e}");
}

#[cfg(feature = "cloud-tpu")]
#[test]
fn prefill_and_decode_programs_compile_ahead_of_time_for_v5e() {
    let Some(libtpu) = oracle::libtpu_path() else { return };
    let dir = fresh_dir("generate_aot");
    let model = data("qwen2").join("model.onnx");
    let out = dir.join("programs");
    let doc = ok(tpu_sdk(&[
        "generate", model.to_str().unwrap(), "--target", "cloud-tpu", "--plugin", libtpu.to_str().unwrap(), "--aot-topology", "v5e:2x2",
        "--output-dir", out.to_str().unwrap(), "--buckets", "16,32", "--json",
    ]));
    let doc: Value = serde_json::from_str(&doc).unwrap();
    let programs = doc["programs"].as_array().unwrap();
    let kinds: Vec<(String, u64, u64)> =
        programs.iter().map(|p| (p["kind"].as_str().unwrap().to_string(), p["cache_positions"].as_u64().unwrap(), p["tokens"].as_u64().unwrap())).collect();
    let want: Vec<(String, u64, u64)> = [("prefill", 16, 16), ("prefill", 32, 16), ("decode", 16, 1), ("prefill", 32, 32), ("decode", 32, 1)]
        .iter()
        .map(|&(k, p, s)| (k.to_string(), p, s))
        .collect();
    assert_eq!(kinds, want);
    for p in programs {
        let f = out.join(p["file"].as_str().unwrap());
        assert!(std::fs::metadata(&f).unwrap().len() > 1000, "{}", f.display());
        // 2 layers × key and value stay on the device, each aliased to its input
        assert_eq!(p["aliases"].as_array().unwrap().len(), 4, "{p}");
        // a prefill gathers its positions into the cache at cache_len; a decode step writes its one position at
        // write_index (TensorScatter: the rest of the cache is not touched)
        let added = if p["kind"] == "decode" { "tpu_sdk.write_index" } else { "tpu_sdk.cache_len" };
        assert!(p["inputs"].as_array().unwrap().iter().any(|i| i == added), "{p}");
    }
    assert!(out.join("manifest.json").is_file());
    // the same programs as StableHLO text (what bench/llm_vs_jax.py gives JAX): the cache arguments aliased
    let mlir = dir.join("mlir");
    ok(tpu_sdk(&["generate", model.to_str().unwrap(), "--emit-stablehlo", "--output-dir", mlir.to_str().unwrap(), "--buckets", "16"]));
    let decode = std::fs::read_to_string(mlir.join("decode_16_1.mlir")).unwrap();
    assert_eq!(decode.matches("tf.aliasing_output").count(), 4, "{}", &decode[..400.min(decode.len())]);
    assert!(mlir.join("prefill_16_16.mlir").is_file());
    // generating and compiling ahead of time are different commands
    let e = expect(tpu_sdk(&["generate", model.to_str().unwrap(), "--aot-topology", "v5e:2x2", "--output-dir", out.to_str().unwrap()]), 2).1;
    assert!(e.contains("--target cloud-tpu"), "{e}");
}

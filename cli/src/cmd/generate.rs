//! `tpu-sdk generate MODEL (--input-ids 1,2,3 | --prompt TEXT [--tokenizer tokenizer.json]) --max-new-tokens N`:
//! text generation with a decoder language model (see `tpu_sdk::generate`); several `--input-ids`/`--prompt` run
//! as one batch.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde_json::json;
use tpu_sdk::generate::{GenerateOptions, GenerateParams, Generator, Sampling};
use tpu_sdk::Tensor;

use super::{parse_list, TargetArgs, UsageError};

/// Arguments of `generate`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The decoder model (.onnx): inputs input_ids, attention_mask, position_ids, past_key_values.N.key|value and
    /// outputs logits, present.N.key|value, as Hugging Face optimum / torch.onnx.export write them; or the no-cache
    /// form (input_ids → logits).
    pub model: PathBuf,
    #[command(flatten)]
    target: TargetArgs,
    /// The prompt as token ids, comma-separated. Repeat for several prompts, generated together as one batch.
    #[arg(long, value_name = "ID,ID,...", conflicts_with = "prompt", required_unless_present_any = ["prompt", "aot_topology", "emit_stablehlo"])]
    input_ids: Vec<String>,
    /// The prompt as text (needs a tokenizer: --tokenizer, or tokenizer.json beside the model). Repeat for several
    /// prompts, generated together as one batch.
    #[arg(long)]
    prompt: Vec<String>,
    /// A Hugging Face tokenizer.json: encodes --prompt and decodes the output to text.
    #[arg(long, value_name = "FILE")]
    tokenizer: Option<PathBuf>,
    /// Most tokens to generate.
    #[arg(long, default_value_t = 32)]
    max_new_tokens: usize,
    /// Sampling temperature; 0 (the default) picks the most likely token (greedy).
    #[arg(long, default_value_t = 0.0)]
    temperature: f32,
    /// Sample only among the K most likely tokens.
    #[arg(long, value_name = "K")]
    top_k: Option<usize>,
    /// Sample only among the most likely tokens whose probabilities sum to P (nucleus sampling).
    #[arg(long, value_name = "P")]
    top_p: Option<f32>,
    /// Seed of the sampler: the same seed gives the same tokens.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Stop after this token id (repeatable, or comma-separated).
    #[arg(long, value_name = "ID")]
    eos: Vec<String>,
    /// Cache and sequence lengths to compile programs for (default 64,128,...,4096); the prompt plus the new
    /// tokens must fit the largest.
    #[arg(long, value_name = "N,N,...")]
    buckets: Option<String>,
    /// cloud-tpu: compute in `f32` (default) or `bf16` (the key/value cache kept on the device in bf16 too).
    #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(["f32", "bf16"]))]
    dtype: Option<String>,
    /// Write the logits each token was picked from to FILE (.npy, [tokens, vocab]).
    #[arg(long, value_name = "FILE")]
    logits_out: Option<PathBuf>,
    /// Print one JSON document (prompt and generated ids, text, timings) instead of streaming the tokens.
    #[arg(long)]
    json: bool,
    /// Instead of generating: compile the prefill and decode programs of every bucket ahead of time for a Cloud
    /// TPU topology (libtpu, e.g. `v5e:2x2`; no TPU needed) into --output-dir, with a manifest.json.
    #[arg(long, value_name = "TOPOLOGY", requires = "output_dir", conflicts_with_all = ["input_ids", "prompt", "emit_stablehlo"])]
    aot_topology: Option<String>,
    /// Instead of generating: write the prefill and decode programs of every bucket as StableHLO (MLIR text, every
    /// weight embedded, cache inputs aliased to outputs) into --output-dir, with a manifest.json.
    #[arg(long, requires = "output_dir", conflicts_with_all = ["input_ids", "prompt"])]
    emit_stablehlo: bool,
    /// Where --aot-topology or --emit-stablehlo write the programs.
    #[arg(long, value_name = "DIR")]
    output_dir: Option<PathBuf>,
}

pub fn main(a: Args) -> Result<()> {
    super::reject_other_targets_flags(&a.target.target, &[])?;
    if (a.target.replicas.is_some() || !a.target.shard.is_empty()) && (a.aot_topology.is_some() || a.emit_stablehlo) {
        return Err(UsageError("--aot-topology and --emit-stablehlo write single-device programs: not with --replicas or --shard".into()).into());
    }
    if let Some(topology) = &a.aot_topology {
        return aot(&a, Some(topology));
    }
    if a.emit_stablehlo {
        return aot(&a, None);
    }
    if a.output_dir.is_some() {
        return Err(UsageError("--output-dir goes with --aot-topology or --emit-stablehlo".into()).into());
    }
    let tokenizer = match (&a.tokenizer, a.prompt.first()) {
        (Some(p), _) => Some(load_tokenizer(p)?),
        (None, Some(_)) => {
            let beside = a.model.with_file_name("tokenizer.json");
            if !beside.is_file() {
                return Err(UsageError(format!(
                    "--prompt needs a tokenizer: give --tokenizer FILE (a Hugging Face tokenizer.json), or put tokenizer.json beside {}",
                    a.model.display()
                ))
                .into());
            }
            Some(load_tokenizer(&beside)?)
        }
        (None, None) => None,
    };
    let prompts: Vec<Vec<i64>> = if !a.input_ids.is_empty() {
        a.input_ids.iter().map(|ids| parse_list::<i64>(ids).map_err(|e| UsageError(format!("--input-ids: {e}")))).collect::<Result<_, _>>()?
    } else {
        let tok = tokenizer.as_ref().expect("a tokenizer was loaded for --prompt");
        a.prompt
            .iter()
            .map(|text| {
                let enc = tok.encode(text.as_str(), true).map_err(|e| UsageError(format!("cannot tokenize the prompt: {e}")))?;
                Ok(enc.get_ids().iter().map(|&i| i as i64).collect())
            })
            .collect::<Result<_, UsageError>>()?
    };
    let sampling = Sampling { temperature: a.temperature, top_k: a.top_k, top_p: a.top_p, seed: a.seed };
    sampling.check().map_err(|e| UsageError(format!("--temperature/--top-k/--top-p: {e}")))?;
    let params = GenerateParams { max_new_tokens: a.max_new_tokens, sampling, eos: Vec::new() };
    let mut params = params;
    for e in &a.eos {
        params.eos.extend(parse_list::<i64>(e).map_err(|e| UsageError(format!("--eos: {e}")))?);
    }
    let mut options = GenerateOptions { keep_logits: a.logits_out.is_some(), ..GenerateOptions::default() };
    if let Some(b) = &a.buckets {
        options.buckets = parse_list::<usize>(b).map_err(|e| UsageError(format!("--buckets: {e}")))?;
    }
    let configured = configure(&a)?;
    let target = configured.build();
    let mut g = Generator::new(&a.model, target, options).with_context(|| format!("cannot load {}", a.model.display()))?;
    if prompts.len() > 1 {
        return batch(&a, &mut g, &prompts, &params, tokenizer.as_ref());
    }
    let prompt = &prompts[0];

    let mut tokens = g.tokens(prompt, &params)?;
    let stream = !a.json;
    let mut shown = String::new();
    let mut stdout = std::io::stdout().lock();
    let mut generated = Vec::new();
    for t in tokens.by_ref() {
        let t = t?;
        generated.push(t);
        if stream {
            match &tokenizer {
                Some(tok) => {
                    // decode everything so far and print what is new (a token can complete a multi-byte character)
                    let text = decode(tok, &generated)?;
                    let incomplete = text.ends_with('\u{FFFD}'); // the rest of the character comes with a later token
                    if let Some(new) = text.strip_prefix(shown.as_str()).filter(|_| !incomplete) {
                        write!(stdout, "{new}")?;
                        shown = text;
                    }
                }
                None => write!(stdout, "{}{t}", if generated.len() > 1 { " " } else { "" })?,
            }
            stdout.flush()?;
        }
    }
    let out = tokens.finish();
    if stream {
        if let Some(tok) = &tokenizer {
            // what was held back as an incomplete character at the end
            let text = decode(tok, &generated)?;
            write!(stdout, "{}", text.strip_prefix(shown.as_str()).unwrap_or(""))?;
        }
        writeln!(stdout)?;
    }
    drop(stdout);
    if let Some(p) = &a.logits_out {
        let vocab = out.logits.first().map_or(0, Vec::len);
        let flat: Vec<f32> = out.logits.iter().flatten().copied().collect();
        let t = Tensor::from_f32(vec![out.logits.len(), vocab], flat);
        tpu_sdk::core::npy::write(p, &t).with_context(|| format!("cannot write {}", p.display()))?;
    }
    let text = match &tokenizer {
        Some(tok) => Some(decode(tok, &out.generated_ids)?),
        None => None,
    };
    if a.json {
        let doc = json!({
            "model": a.model.display().to_string(),
            "target": a.target.target,
            "mode": format!("{:?}", g.mode()).to_lowercase(),
            "input_ids": out.input_ids,
            "generated_ids": out.generated_ids,
            "text": text,
            "prefill_ms": out.prefill.as_secs_f64() * 1e3,
            "decode_steps": out.decode_steps,
            "decode_tokens_per_s": out.decode_tokens_per_s(),
            "compile_ms": out.compile.as_secs_f64() * 1e3,
            "programs_compiled": g.programs_compiled(),
            "cache_on_device": g.cache_on_target(),
            "cache_in_place": g.cache_in_place(),
            "transfers": transfers_json(&g),
        });
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        eprintln!(
            "{} prompt tokens, {} generated; prefill {:.1} ms, decode {:.1} tokens/s ({} programs compiled in {:.0} ms)",
            out.input_ids.len(),
            out.generated_ids.len(),
            out.prefill.as_secs_f64() * 1e3,
            out.decode_tokens_per_s(),
            g.programs_compiled(),
            out.compile.as_secs_f64() * 1e3
        );
    }
    Ok(())
}

/// The host ↔ target traffic of the programs that keep the cache on the target (`--json`'s "transfers").
fn transfers_json(g: &Generator) -> serde_json::Value {
    let t = g.transfers();
    json!({
        "uploads": t.uploads,
        "upload_bytes": t.upload_bytes,
        "downloads": t.downloads,
        "download_bytes": t.download_bytes,
        "cache_downloads": t.state_downloads,
    })
}

/// Several prompts: generated as one batch, then printed one per line (or as JSON).
fn batch(a: &Args, g: &mut Generator, prompts: &[Vec<i64>], params: &GenerateParams, tokenizer: Option<&tokenizers::Tokenizer>) -> Result<()> {
    if a.logits_out.is_some() {
        return Err(UsageError("--logits-out writes the logits of one prompt: give one --input-ids or --prompt".into()).into());
    }
    let outs = g.generate_batch(prompts, params)?;
    let texts = outs.iter().map(|o| tokenizer.map(|t| decode(t, &o.generated_ids)).transpose()).collect::<Result<Vec<_>>>()?;
    let o = &outs[0];
    // every row ran every step: the batch's tokens per second
    let steps = outs.iter().map(|o| o.decode_steps).max().unwrap_or(0);
    let tokens: usize = outs.iter().map(|o| o.decode_steps).sum();
    let rate = if o.decode.as_secs_f64() > 0.0 { tokens as f64 / outs.iter().map(|o| o.decode).max().unwrap_or_default().as_secs_f64() } else { 0.0 };
    if a.json {
        let rows: Vec<_> = outs
            .iter()
            .zip(&texts)
            .map(|(o, t)| json!({"input_ids": o.input_ids, "generated_ids": o.generated_ids, "text": t}))
            .collect();
        let doc = json!({
            "model": a.model.display().to_string(),
            "target": a.target.target,
            "mode": format!("{:?}", g.mode()).to_lowercase(),
            "batch": rows,
            "prefill_ms": o.prefill.as_secs_f64() * 1e3,
            "decode_steps": steps,
            "decode_tokens_per_s": rate,
            "compile_ms": o.compile.as_secs_f64() * 1e3,
            "programs_compiled": g.programs_compiled(),
            "cache_on_device": g.cache_on_target(),
            "cache_in_place": g.cache_in_place(),
            "transfers": transfers_json(g),
        });
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        for (o, t) in outs.iter().zip(&texts) {
            match t {
                Some(t) => println!("{t}"),
                None => println!("{}", o.generated_ids.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(" ")),
            }
        }
        eprintln!(
            "{} prompts, {} decode steps; prefill {:.1} ms, decode {:.1} tokens/s over the batch ({} programs compiled in {:.0} ms)",
            outs.len(),
            steps,
            o.prefill.as_secs_f64() * 1e3,
            rate,
            g.programs_compiled(),
            o.compile.as_secs_f64() * 1e3
        );
    }
    Ok(())
}

/// `--aot-topology` / `--emit-stablehlo`: every program a generation can need, compiled for `topology` or
/// (`None`) written as StableHLO text.
#[cfg(feature = "cloud-tpu")]
fn aot(a: &Args, topology: Option<&str>) -> Result<()> {
    use tpu_sdk::core::passes::kv_cache;
    if topology.is_some() && a.target.target != super::CLOUD_TPU {
        return Err(UsageError("--aot-topology compiles for a Cloud TPU: give --target cloud-tpu".into()).into());
    }
    let dir = a.output_dir.as_ref().expect("clap requires --output-dir with --aot-topology and --emit-stablehlo");
    let mut options = GenerateOptions::default();
    if let Some(b) = &a.buckets {
        options.buckets = parse_list::<usize>(b).map_err(|e| UsageError(format!("--buckets: {e}")))?;
    }
    let buckets = {
        let mut b = options.buckets.clone();
        b.sort_unstable();
        b.dedup();
        b
    };
    let configured = configure(a)?;
    let g = Generator::new(&a.model, configured.build(), options).with_context(|| format!("cannot load {}", a.model.display()))?;
    let mut target = tpu_sdk_cloud_tpu::CloudTpuTarget::new();
    target.plugin = a.target.plugin.clone();
    target.compute_dtype = compute_dtype(a);
    // (kind, cache positions, tokens): a prompt of n tokens is prefilled by (bucket ≥ n, bucket ≥ n + 1)
    let mut programs = Vec::new();
    for (k, &b) in buckets.iter().enumerate() {
        programs.push(("prefill", b, b));
        if let Some(&next) = buckets.get(k + 1) {
            programs.push(("prefill", next, b));
        }
        programs.push(("decode", b, 1));
    }
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let bar = super::progress_bar(a.json, "{prefix} [{bar:30}] {pos}/{len}");
    let mut entries = Vec::new();
    for (n, &(kind, past, seq)) in programs.iter().enumerate() {
        bar.report(&format!("compiling {kind} program (cache {past}, {seq} tokens)"), n as u64, programs.len() as u64);
        let (graph, links) = g.resident_program(past, seq)?;
        let aliases: Vec<(usize, usize)> = links.clone();
        let opts = tpu_sdk_cloud_tpu::lower::LowerOptions { max_inline_constant: None, ..target.lower };
        let graph = match target.compute_dtype {
            Some(tpu_sdk::DType::BF16) => {
                let (outs, ins): (Vec<usize>, Vec<usize>) = aliases.iter().copied().unzip();
                tpu_sdk_cloud_tpu::bf16::to_bf16_keeping(&graph, &ins, &outs)
            }
            _ => graph,
        };
        let program = tpu_sdk_cloud_tpu::lower::lower_program_aliased(&graph, &opts, &aliases)?;
        let (file, bytes) = match topology {
            Some(topology) => {
                let art = target.compile_program_for_topology(&program, topology, &tpu_sdk_cloud_tpu::pjrt::CompileOptions::default())?;
                (format!("{kind}_{past}_{seq}.pjrt"), art.executable)
            }
            None => (format!("{kind}_{past}_{seq}.mlir"), program.mlir.into_bytes()),
        };
        super::compile::write_atomically(&dir.join(&file), &bytes).with_context(|| format!("cannot write {}", dir.join(&file).display()))?;
        let names = |ids: &[tpu_sdk::core::ir::ValueId]| ids.iter().map(|&v| graph.value(v).name.clone()).collect::<Vec<_>>();
        entries.push(json!({
            "kind": kind, "cache_positions": past, "tokens": seq, "file": file, "bytes": bytes.len(),
            "inputs": names(&graph.inputs), "outputs": names(&graph.outputs),
            "aliases": aliases.iter().map(|&(o, i)| json!({"output": o, "input": i})).collect::<Vec<_>>(),
        }));
    }
    bar.report("compiled", programs.len() as u64, programs.len() as u64);
    let manifest = json!({
        "model": a.model.display().to_string(), "topology": topology, "buckets": buckets,
        "added_inputs": [kv_cache::CACHE_LEN_INPUT, kv_cache::NEW_COUNT_INPUT], "programs": entries,
    });
    let text = serde_json::to_string_pretty(&manifest)?;
    super::compile::write_atomically(&dir.join("manifest.json"), text.as_bytes())?;
    if a.json {
        println!("{text}");
    } else {
        eprintln!("{} programs ({}) written to {}", programs.len(), topology.unwrap_or("StableHLO"), dir.display());
    }
    Ok(())
}

#[cfg(not(feature = "cloud-tpu"))]
fn aot(_: &Args, _: Option<&str>) -> Result<()> {
    Err(UsageError("--aot-topology and --emit-stablehlo need the cloud-tpu feature (build with default features)".into()).into())
}

#[cfg(feature = "cloud-tpu")]
fn compute_dtype(a: &Args) -> Option<tpu_sdk::DType> {
    a.dtype.as_deref().map(|d| if d == "bf16" { tpu_sdk::DType::BF16 } else { tpu_sdk::DType::F32 })
}

/// The target of `--target` and its flags, `--dtype` included (a cloud-tpu flag).
fn configure(a: &Args) -> Result<tpu_sdk::targets::ConfiguredTarget> {
    super::reject_other_targets_flags(&a.target.target, &[("--dtype", super::CLOUD_TPU, a.dtype.is_some())])?;
    #[cfg_attr(not(feature = "cloud-tpu"), allow(unused_mut))]
    let mut configured = a.target.configure(Some(&a.model))?;
    #[cfg(feature = "cloud-tpu")]
    if let tpu_sdk::targets::ConfiguredTarget::CloudTpu(t) = &mut configured {
        t.compute_dtype = compute_dtype(a);
    }
    Ok(configured)
}

fn load_tokenizer(path: &Path) -> Result<tokenizers::Tokenizer> {
    tokenizers::Tokenizer::from_file(path)
        .map_err(|e| UsageError(format!("cannot read the tokenizer {}: {e} (expected a Hugging Face tokenizer.json)", path.display())).into())
}

fn decode(tok: &tokenizers::Tokenizer, ids: &[i64]) -> Result<String> {
    let ids: Vec<u32> = ids.iter().map(|&i| i as u32).collect();
    tok.decode(&ids, true).map_err(|e| anyhow::anyhow!("cannot decode tokens: {e}"))
}

//! Text generation with a decoder language model through the library: `Generator` prefills the prompt and
//! decodes token by token with the key/value cache kept between steps, printing tokens as they come.
//!
//! ```text
//! cargo run --release --example generate_text -- MODEL.onnx [--tokenizer tokenizer.json] [--prompt TEXT]
//!     [--max-new-tokens N] [--target cpu|cloud-tpu]
//! cargo run --release --example generate_text -- cli/tests/data/llm/llama/model.onnx --prompt "The quick brown"
//! ```
//!
//! The model is a decoder exported as Hugging Face optimum or `torch.onnx.export` of transformers write it
//! (`input_ids`, `attention_mask`, `position_ids`, `past_key_values.N.key|value` → `logits`, `present.N.*`);
//! `scripts/make_llm.py` writes small Llama and Qwen2 ones with random weights (their text is gibberish, but the
//! tokens are those transformers' own `generate` picks). The tokenizer is the model's `tokenizer.json`, read by
//! HF's Rust `tokenizers` (by default the one beside the model).

use std::io::Write;
use std::path::PathBuf;

use tpu_sdk::generate::{GenerateOptions, GenerateParams, Generator};

#[path = "common.rs"]
mod common;

struct Args {
    model: PathBuf,
    tokenizer: Option<PathBuf>,
    prompt: String,
    max_new_tokens: usize,
    target: String,
}

fn parse() -> Result<Args, String> {
    let mut it = std::env::args().skip(1);
    let mut a = Args { model: PathBuf::new(), tokenizer: None, prompt: "The quick brown fox".into(), max_new_tokens: 24, target: "cpu".into() };
    let mut model = None;
    while let Some(x) = it.next() {
        let mut value = |flag: &str| it.next().ok_or_else(|| format!("{flag} needs a value"));
        match x.as_str() {
            "--tokenizer" => a.tokenizer = Some(PathBuf::from(value("--tokenizer")?)),
            "--prompt" => a.prompt = value("--prompt")?,
            "--max-new-tokens" => a.max_new_tokens = value("--max-new-tokens")?.parse().map_err(|_| "--max-new-tokens: not a count")?,
            "--target" => a.target = value("--target")?,
            "-h" | "--help" => return Err(String::new()),
            f if f.starts_with("--") => return Err(format!("unknown flag {f}")),
            _ if model.is_none() => model = Some(PathBuf::from(x)),
            _ => return Err(format!("unexpected argument {x}")),
        }
    }
    a.model = model.ok_or("expected MODEL")?;
    Ok(a)
}

fn main() {
    common::main(parse, "generate_text MODEL.onnx [--tokenizer tokenizer.json] [--prompt TEXT] [--max-new-tokens N] [--target T]", run)
}

fn run(a: Args) -> Result<(), Box<dyn std::error::Error>> {
    let tokenizer = a.tokenizer.clone().unwrap_or_else(|| a.model.with_file_name("tokenizer.json"));
    let tok = tokenizers::Tokenizer::from_file(&tokenizer).map_err(|e| format!("{}: {e}", tokenizer.display()))?;
    let ids: Vec<i64> = tok.encode(a.prompt.as_str(), true).map_err(|e| e.to_string())?.get_ids().iter().map(|&i| i as i64).collect();

    // what a program needs: a target, a generator, and the tokens as they come
    let target = tpu_sdk::targets::by_name(&a.target)?;
    let mut generator = Generator::new(&a.model, target, GenerateOptions::default())?;
    let params = GenerateParams { max_new_tokens: a.max_new_tokens, ..GenerateParams::default() };
    let (mut generated, mut shown) = (Vec::new(), String::new());
    print!("{}", a.prompt);
    for token in generator.tokens(&ids, &params)? {
        generated.push(token? as u32);
        // print what the new token adds to the text (unless it ends inside a multi-byte character)
        let text = tok.decode(&generated, true).map_err(|e| e.to_string())?;
        if let Some(new) = text.strip_prefix(shown.as_str()).filter(|_| !text.ends_with('\u{FFFD}')) {
            print!("{new}");
            std::io::stdout().flush()?;
            shown = text;
        }
    }
    println!();
    eprintln!("{} tokens generated ({} programs compiled)", generated.len(), generator.programs_compiled());
    Ok(())
}

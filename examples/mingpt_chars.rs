//! Character-level text generation with a minGPT-style model (GPT-2 architecture, one token per character)
//! through the library's `Generator`.
//!
//! ```text
//! cargo run --release --example mingpt_chars -- MODEL.onnx [--prompt TEXT] [--chars N] [--temperature T --seed S]
//! cargo run --release --example mingpt_chars -- cli/tests/data/llm/mingpt/model.onnx --prompt "ROMEO:"
//! ```
//!
//! The vocabulary is `chars.json` beside the model (a JSON list of one-character strings, token id = index):
//! minGPT's Tiny Shakespeare characters for the test model `scripts/make_llm.py --arch gpt2` writes (seeded
//! random weights: the text is noise, the tokens are those transformers' own `generate` picks).

use std::io::Write;
use std::path::PathBuf;

use tpu_sdk::generate::{GenerateOptions, GenerateParams, Generator, Sampling};

#[path = "common.rs"]
mod common;

struct Args {
    model: PathBuf,
    prompt: String,
    chars: usize,
    temperature: f32,
    seed: u64,
    target: String,
}

fn parse() -> Result<Args, String> {
    let mut a = Args { model: PathBuf::new(), prompt: "First Citizen:\n".into(), chars: 64, temperature: 0.0, seed: 0, target: "cpu".into() };
    let mut model = None;
    let mut it = std::env::args().skip(1);
    while let Some(x) = it.next() {
        let mut value = |flag: &str| it.next().ok_or_else(|| format!("{flag} needs a value"));
        match x.as_str() {
            "--prompt" => a.prompt = value("--prompt")?,
            "--chars" => a.chars = value("--chars")?.parse().map_err(|_| "--chars: not a count")?,
            "--temperature" => a.temperature = value("--temperature")?.parse().map_err(|_| "--temperature: not a number")?,
            "--seed" => a.seed = value("--seed")?.parse().map_err(|_| "--seed: not a number")?,
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
    common::main(parse, "mingpt_chars MODEL.onnx [--prompt TEXT] [--chars N] [--temperature T --seed S] [--target T]", run)
}

fn run(a: Args) -> Result<(), Box<dyn std::error::Error>> {
    let vocab_file = a.model.with_file_name("chars.json");
    let text = std::fs::read_to_string(&vocab_file).map_err(|e| format!("{}: {e}", vocab_file.display()))?;
    let chars: Vec<String> = serde_json::from_str(&text).map_err(|e| format!("{}: not a JSON list of characters: {e}", vocab_file.display()))?;
    let ids = a
        .prompt
        .chars()
        .map(|c| chars.iter().position(|v| v.chars().eq(std::iter::once(c))).map(|i| i as i64).ok_or_else(|| format!("the vocabulary has no {c:?}")))
        .collect::<Result<Vec<i64>, String>>()?;

    let mut generator = Generator::new(&a.model, tpu_sdk::targets::by_name(&a.target)?, GenerateOptions::default())?;
    let sampling = Sampling { temperature: a.temperature, seed: a.seed, ..Sampling::default() };
    let params = GenerateParams { max_new_tokens: a.chars, sampling, ..GenerateParams::default() };
    print!("{}", a.prompt);
    for t in generator.tokens(&ids, &params)? {
        let t = t? as usize;
        print!("{}", chars.get(t).map_or("?", String::as_str));
        std::io::stdout().flush()?;
    }
    println!();
    eprintln!("{} characters generated", a.chars);
    Ok(())
}

//! Text generation with decoder language models: prefill the prompt, then decode token by token with the
//! key/value cache carried between steps.
//!
//! A [`Generator`] runs a decoder ONNX file in the layout Hugging Face optimum and `torch.onnx.export` of
//! transformers write ([`DecoderInterface`]) on any [`Target`]. It compiles few programs, as TPU serving stacks
//! do: shapes are static per **bucket** (`GenerateOptions::buckets`, e.g. 64, 128, ..., 4096). The cache is a
//! fixed number of positions `P` (a bucket) of which the first `len` are filled; the attention mask marks the
//! filled ones, `position_ids` give each token its true position, and the step's new keys and values (the
//! model returns them after the `P` past ones) are copied into the next free positions. So one decode program
//! serves every length up to `P`, and a prompt is prefilled by one program per (prompt bucket, cache bucket).
//! Where the cache lives on the host (the CPU), the prefill runs on an empty cache with the prompt padded to a
//! power of two (at least 16), and its keys and values are copied into the first bucket that holds them.
//!
//! Three forms of model are run:
//! - cache form with `position_ids`: bucketed as above;
//! - cache form without `position_ids` (the model derives positions from the cache length): exact lengths, the
//!   returned cache becomes the next input as it is; one program per length (fine on the CPU, slow to
//!   compile on an accelerator);
//! - no-cache form (`input_ids` → `logits`): the whole sequence is run at every step, right-padded to a bucket
//!   (causal attention keeps the padding from reaching the real tokens).
//!
//! ```no_run
//! use tpu_sdk::generate::{GenerateOptions, GenerateParams, Generator};
//! let target = tpu_sdk::targets::by_name("cpu")?;
//! let mut g = Generator::new("model.onnx", target, GenerateOptions::default())?;
//! let params = GenerateParams { max_new_tokens: 20, ..GenerateParams::default() };
//! for token in g.tokens(&[1, 306, 4658], &params)? {
//!     print!("{} ", token?);
//! }
//! # Ok::<(), tpu_sdk::Error>(())
//! ```

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::core::passes::{kv_cache, logits_row};
use crate::core::target::{ResidentExecutable, Transfers};
use crate::{DType, Error, Executable, LoadOptions, Model, Result, Target, Tensor};

mod cache;
mod interface;
mod sampling;

pub use cache::{copy_positions, KvCache};
pub use interface::{DecoderInterface, KvNames};
pub use sampling::{argmax, pick, Rng, Sampling};

/// How a [`Generator`] compiles and runs its model.
#[derive(Clone, Debug)]
pub struct GenerateOptions {
    /// The lengths programs are compiled for, ascending: cache capacities and (padded) sequence lengths. The
    /// prompt plus the new tokens must fit in the largest.
    pub buckets: Vec<usize>,
    /// How to load the model (symbolic dims other than the sequence, cache and batch ones; `no_optimize`).
    pub load: LoadOptions,
    /// Keep the logits of every step in [`Generation::logits`] (tests, `--logits-out`).
    pub keep_logits: bool,
}

impl Default for GenerateOptions {
    fn default() -> GenerateOptions {
        GenerateOptions { buckets: default_buckets(), load: LoadOptions::default(), keep_logits: false }
    }
}

/// 64, 128, ..., 4096.
pub fn default_buckets() -> Vec<usize> {
    (6..=12).map(|k| 1usize << k).collect()
}

/// What to generate.
#[derive(Clone, Debug)]
pub struct GenerateParams {
    /// Most tokens to generate.
    pub max_new_tokens: usize,
    /// How each token is chosen (greedy by default).
    pub sampling: Sampling,
    /// Stop after any of these tokens (it is included in the output).
    pub eos: Vec<i64>,
}

impl Default for GenerateParams {
    fn default() -> GenerateParams {
        GenerateParams { max_new_tokens: 32, sampling: Sampling::default(), eos: Vec::new() }
    }
}

/// The outcome of [`Generator::generate`].
#[derive(Clone, Debug, Default)]
pub struct Generation {
    /// The prompt.
    pub input_ids: Vec<i64>,
    /// The generated tokens (an end-of-sequence token included).
    pub generated_ids: Vec<i64>,
    /// Time of the prefill step (the prompt through the model, the first token picked), compilation excluded.
    pub prefill: Duration,
    /// Time of all decode steps, compilation excluded.
    pub decode: Duration,
    /// Decode steps run (one per generated token after the first).
    pub decode_steps: usize,
    /// Time spent loading and compiling programs during this generation.
    pub compile: Duration,
    /// Per generated token, the logits it was picked from (only with `keep_logits`).
    pub logits: Vec<Vec<f32>>,
}

impl Generation {
    /// Decode speed in tokens per second (0 when no decode step ran).
    pub fn decode_tokens_per_s(&self) -> f64 {
        let s = self.decode.as_secs_f64();
        if self.decode_steps == 0 || s == 0.0 {
            0.0
        } else {
            self.decode_steps as f64 / s
        }
    }
}

/// How the model is driven, from its interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Cache form with `position_ids`: static shapes per bucket.
    Bucketed,
    /// Cache form without `position_ids`: exact lengths, one program per length.
    Exact,
    /// No-cache form: the whole sequence each step, padded to a bucket.
    NoCache,
}

/// What feeds one graph input.
#[derive(Clone, Copy, Debug)]
enum Role {
    Ids,
    Mask,
    Positions,
    /// cache tensor k (key, value, key, value, ... in layer order)
    Past(usize),
    /// filled cache positions (the resident form's added input)
    CacheLen,
    /// real new positions this step (the resident form's added input)
    NewCount,
    /// the position whose logits are computed (added by [`logits_row::select_logits_row`])
    LogitsRow,
    /// where each row's new position goes in the cache (the in-place decode form's added input)
    WriteIndex,
}

/// How a program runs.
enum Exe {
    /// On host tensors: the cache goes in and `present` (cache + new positions) comes out every step.
    Host(Box<dyn Executable>),
    /// The cache stays on the target (rewritten by [`kv_cache::write_cache_in_place`], outputs aliased to
    /// inputs): only ids, mask, positions go in and the logits come out.
    Resident(Box<dyn ResidentExecutable>),
}

/// A model prepared for one (cache positions, sequence length).
struct Program {
    exe: Exe,
    /// what feeds each input the caller gives (graph order; resident inputs left out)
    roles: Vec<Role>,
    /// index of the logits among the outputs returned
    logits: usize,
    /// host programs: index of each cache tensor among the outputs
    present: Vec<usize>,
    vocab: usize,
    kv_dtype: Option<DType>,
    /// A host decode program that writes the new position into the cache it is given
    /// ([`kv_cache::scatter_cache_in_place`]): the cache goes in by value and comes back as `present` in the same
    /// memory, and the attention mask is laid out like the cache.
    in_place: bool,
}

/// Generates tokens with a decoder model on a target.
pub struct Generator {
    path: PathBuf,
    target: Box<dyn Target>,
    interface: DecoderInterface,
    mode: Mode,
    options: GenerateOptions,
    programs: HashMap<Key, Program>,
    compiled: usize,
    compile_time: Duration,
}

impl Generator {
    /// Reads the decoder `model` (an ONNX file) for `target`. Programs are compiled when first needed.
    pub fn new(model: impl AsRef<Path>, target: Box<dyn Target>, options: GenerateOptions) -> Result<Generator> {
        let path = model.as_ref().to_path_buf();
        if path.extension().and_then(|e| e.to_str()).is_some_and(|e| !e.eq_ignore_ascii_case("onnx")) {
            return Err(Error::Unsupported(format!("{}: `generate` runs ONNX decoder models (.onnx)", path.display())));
        }
        let interface = DecoderInterface::of_file(&path)?;
        let mode = match (interface.has_cache(), interface.position_ids) {
            (false, _) => Mode::NoCache,
            (true, true) => Mode::Bucketed,
            (true, false) => Mode::Exact,
        };
        let mut options = options;
        options.buckets.sort_unstable();
        options.buckets.dedup();
        if options.buckets.is_empty() || options.buckets[0] == 0 {
            return Err(Error::InputMismatch("buckets must be positive lengths".into()));
        }
        Ok(Generator { path, target, interface, mode, options, programs: HashMap::new(), compiled: 0, compile_time: Duration::ZERO })
    }

    /// The model's interface.
    pub fn interface(&self) -> &DecoderInterface {
        &self.interface
    }

    /// How the model is driven.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Programs compiled so far (one per distinct (cache, sequence) shape).
    pub fn programs_compiled(&self) -> usize {
        self.compiled
    }

    /// Host ↔ target traffic of the programs that keep the cache on the target, summed (all zero when none
    /// does: the CPU, or a model run in host form).
    pub fn transfers(&self) -> Transfers {
        let mut t = Transfers::default();
        for p in self.programs.values() {
            if let Exe::Resident(e) = &p.exe {
                let x = e.transfers();
                t.uploads += x.uploads;
                t.upload_bytes += x.upload_bytes;
                t.downloads += x.downloads;
                t.download_bytes += x.download_bytes;
                t.state_downloads += x.state_downloads;
            }
        }
        t
    }

    /// Whether the key/value cache stays on the target between steps (a target that keeps values, a bucketed
    /// model), as far as the programs compiled so far tell.
    pub fn cache_on_target(&self) -> bool {
        self.programs.values().any(|p| matches!(p.exe, Exe::Resident(_)))
    }

    /// Whether host decode steps update the cache where it is (no copy of it per step: see
    /// [`kv_cache::scatter_cache_in_place`]), as far as the programs compiled so far tell.
    pub fn cache_in_place(&self) -> bool {
        self.programs.values().any(|p| p.in_place)
    }

    /// Generates up to `params.max_new_tokens` tokens after `prompt` and returns them with timings.
    pub fn generate(&mut self, prompt: &[i64], params: &GenerateParams) -> Result<Generation> {
        let mut tokens = self.tokens(prompt, params)?;
        for t in tokens.by_ref() {
            t?;
        }
        Ok(tokens.finish())
    }

    /// The tokens generated after `prompt`, one step per item, as they are produced.
    pub fn tokens(&mut self, prompt: &[i64], params: &GenerateParams) -> Result<Tokens<'_>> {
        self.start(&[prompt.to_vec()], params)
    }

    /// Generates after several prompts at once, as one batch: the prompts are left-padded to the longest (the mask
    /// hides the padding, positions count from each prompt's first token), every step runs all rows, and a row
    /// that reaches an end-of-sequence token stops while the others go on. Needs the cache form with
    /// `position_ids`; one prompt runs as [`Generator::generate`] does.
    pub fn generate_batch(&mut self, prompts: &[Vec<i64>], params: &GenerateParams) -> Result<Vec<Generation>> {
        let mut tokens = self.start(prompts, params)?;
        while !tokens.done {
            tokens.step()?;
        }
        Ok(tokens.finish_all())
    }

    fn start(&mut self, prompts: &[Vec<i64>], params: &GenerateParams) -> Result<Tokens<'_>> {
        if prompts.is_empty() || prompts.iter().any(|p| p.is_empty()) {
            return Err(Error::InputMismatch("the prompt is empty: give at least one token".into()));
        }
        if prompts.len() > 1 && self.mode != Mode::Bucketed {
            return Err(Error::Unsupported(format!(
                "several prompts at once need the cache form with position_ids (this model runs {:?}: give one prompt at a time)",
                self.mode
            )));
        }
        params.sampling.check().map_err(Error::InputMismatch)?;
        if let Some(&bad) = prompts.iter().flatten().find(|&&t| t < 0) {
            return Err(Error::InputMismatch(format!("token id {bad} is negative")));
        }
        let longest = prompts.iter().map(Vec::len).max().unwrap_or(0);
        if self.mode != Mode::Exact && params.max_new_tokens > 0 {
            // the longest sequence a program sees: the prompt and every generated token but the last
            let need = longest + params.max_new_tokens - 1;
            let largest = *self.options.buckets.last().expect("checked non-empty");
            if longest > largest || need + usize::from(self.mode == Mode::Bucketed) > largest {
                return Err(Error::InputMismatch(format!(
                    "the prompt ({longest} tokens) and {} new tokens need {} positions, more than the largest bucket ({largest}): give a larger \
                     one (--buckets) or ask for fewer tokens",
                    params.max_new_tokens,
                    need + usize::from(self.mode == Mode::Bucketed)
                )));
            }
        }
        // A target that splits the batch across data-parallel replicas takes a multiple of their number: filler rows
        // (copies of the last prompt, inactive from the start, dropped from the results) make it up.
        let multiple = self.target.batch_multiple().max(1);
        let real = prompts.len();
        let mut rows: Vec<Vec<i64>> = prompts.to_vec();
        if multiple > 1 {
            if self.mode != Mode::Bucketed {
                return Err(Error::Unsupported(format!(
                    "--replicas {multiple} splits a batch of prompts across devices, which needs the cache form with position_ids (this model runs {:?})",
                    self.mode
                )));
            }
            while rows.len() % multiple != 0 {
                rows.push(prompts[real - 1].clone());
            }
        }
        let rng = Rng::new(params.sampling.seed);
        let compile0 = self.compile_time;
        Ok(Tokens {
            g: self,
            params: params.clone(),
            rng,
            outs: rows.iter().map(|p| Generation { input_ids: p.clone(), ..Generation::default() }).collect(),
            pads: rows.iter().map(|p| longest - p.len()).collect(),
            active: (0..rows.len()).map(|r| r < real && params.max_new_tokens > 0).collect(),
            real,
            last: vec![0; rows.len()],
            steps: 0,
            cache: None,
            holder: None,
            compile0,
            done: params.max_new_tokens == 0,
        })
    }

    fn bucket_at_least(&self, n: usize) -> Result<usize> {
        self.options.buckets.iter().copied().find(|&b| b >= n).ok_or_else(|| {
            Error::InputMismatch(format!("{n} positions do not fit the largest bucket ({})", self.options.buckets.last().copied().unwrap_or(0)))
        })
    }

    /// The program for `past` cache positions and `seq` tokens, compiled on first use.
    fn program(&mut self, past: usize, seq: usize, batch: usize) -> Result<&mut Program> {
        if !self.programs.contains_key(&(past, seq, batch)) {
            if self.mode == Mode::Exact && self.programs.len() >= 4 {
                self.programs.clear(); // exact lengths never repeat within a generation
            }
            let t0 = Instant::now();
            let p = self.compile(past, seq, batch)?;
            self.compile_time += t0.elapsed();
            self.compiled += 1;
            self.programs.insert((past, seq, batch), p);
        }
        Ok(self.programs.get_mut(&(past, seq, batch)).expect("inserted above"))
    }

    /// The model loaded for `past` cache positions, `seq` tokens and `batch` rows, and what feeds each input (by
    /// name).
    fn load_graph(&self, past: usize, seq: usize, batch: usize) -> Result<(crate::Graph, HashMap<String, Role>)> {
        let i = &self.interface;
        let mut load = self.options.load.clone();
        let mut roles = HashMap::new();
        load.input_shapes.insert("input_ids".into(), vec![batch, seq]);
        roles.insert("input_ids".to_string(), Role::Ids);
        if i.attention_mask {
            let total = if i.has_cache() { past + seq } else { seq };
            load.input_shapes.insert("attention_mask".into(), vec![batch, total]);
            roles.insert("attention_mask".to_string(), Role::Mask);
        }
        if i.position_ids {
            load.input_shapes.insert("position_ids".into(), vec![batch, seq]);
            roles.insert("position_ids".to_string(), Role::Positions);
        }
        for (l, kv) in i.past.iter().enumerate() {
            for (k, name) in [&kv.key, &kv.value].into_iter().enumerate() {
                let (h, d) = match (i.kv_heads, i.head_dim) {
                    (Some(h), Some(d)) => (h, d),
                    _ => {
                        return Err(Error::Unsupported(format!(
                            "cache input '{name}' leaves kv_heads or head_dim free: the file must fix dims 1 and 3 of [batch, kv_heads, past, head_dim]"
                        )))
                    }
                };
                load.input_shapes.insert(name.clone(), vec![batch, h, past, d]);
                roles.insert(name.clone(), Role::Past(2 * l + k));
            }
        }
        let model = Model::load_with(&self.path, &load)?;
        let mut g = model.graph().clone();
        if seq > 1 {
            // only the last real token's logits are read: the LM head runs on that row alone
            if let Some(&out) = g.outputs.iter().find(|&&o| g.values[o.0].name == i.logits) {
                if logits_row::select_logits_row(&mut g, out)?.is_some() {
                    roles.insert(logits_row::LOGITS_ROW_INPUT.to_string(), Role::LogitsRow);
                }
            }
        }
        Ok((g, roles))
    }

    /// The program for `past` cache positions and `seq` tokens in the form that keeps the cache on the target, with
    /// its links (each cache output → its cache input): what [`Target::prepare_resident`] takes, and what
    /// ahead-of-time compilation for a TPU topology compiles. A decode step (one token) writes its position into the
    /// cache ([`kv_cache::scatter_cache_in_place`]: input [`kv_cache::WRITE_INDEX_INPUT`] added, the mask laid out
    /// like the cache); a prefill gathers its positions into it ([`kv_cache::write_cache_in_place`]: inputs
    /// [`kv_cache::CACHE_LEN_INPUT`] and [`kv_cache::NEW_COUNT_INPUT`] added).
    pub fn resident_program(&self, past: usize, seq: usize) -> Result<(crate::Graph, Vec<crate::core::target::ResidentLink>)> {
        if self.mode != Mode::Bucketed {
            return Err(Error::Unsupported(format!("the cache stays on the target only for a cache-form model with position_ids (this one runs {:?})", self.mode)));
        }
        let (g, _, links, _) = self.resident_graph(past, seq, 1)?;
        Ok((g, links))
    }

    /// The resident form (see [`Generator::resident_program`]) for `batch` rows: the graph, what feeds each input
    /// (by name), the links, and whether it is the in-place decode form.
    #[allow(clippy::type_complexity)]
    fn resident_graph(&self, past: usize, seq: usize, batch: usize) -> Result<(crate::Graph, HashMap<String, Role>, Vec<crate::core::target::ResidentLink>, bool)> {
        if seq == 1 && past > 0 {
            if let Ok((g, roles)) = self.in_place_graph(past, batch) {
                let links = self.cache_links(&g)?;
                return Ok((g, roles, links, true));
            }
        }
        let (g, mut roles) = self.load_graph(past, seq, batch)?;
        let (rg, links) = self.resident_form(&g)?;
        roles.insert(kv_cache::CACHE_LEN_INPUT.to_string(), Role::CacheLen);
        roles.insert(kv_cache::NEW_COUNT_INPUT.to_string(), Role::NewCount);
        Ok((rg, roles, links, false))
    }

    /// Each cache output's index → its cache input's index, in cache order.
    fn cache_links(&self, g: &crate::Graph) -> Result<Vec<crate::core::target::ResidentLink>> {
        let i = &self.interface;
        let position = |list: &[crate::core::ir::ValueId], n: &str, what: &str| {
            list.iter().position(|&v| g.values[v.0].name == *n).ok_or_else(|| Error::InvalidModel(format!("the model lost its {what} '{n}'")))
        };
        i.past
            .iter()
            .zip(&i.present)
            .flat_map(|(p, q)| [(&p.key, &q.key), (&p.value, &q.value)])
            .map(|(p, q)| Ok((position(&g.outputs, q, "output")?, position(&g.inputs, p, "input")?)))
            .collect()
    }

    /// Each (cache input, cache output) value of `g`, in cache order: what the `passes::kv_cache` rewrites take.
    fn cache_pairs(&self, g: &crate::Graph) -> Result<Vec<(crate::core::ir::ValueId, crate::core::ir::ValueId)>> {
        Ok(self.cache_links(g)?.into_iter().map(|(o, i)| (g.inputs[i], g.outputs[o])).collect())
    }

    fn resident_form(&self, g: &crate::Graph) -> Result<(crate::Graph, Vec<crate::core::target::ResidentLink>)> {
        let mut rg = g.clone();
        let pairs = self.cache_pairs(&rg)?;
        kv_cache::write_cache_in_place(&mut rg, &pairs)?;
        let links = self.cache_links(&rg)?;
        Ok((rg, links))
    }

    fn compile(&self, past: usize, seq: usize, batch: usize) -> Result<Program> {
        let i = &self.interface;
        let resident = self.mode == Mode::Bucketed && self.target.keeps_resident_values();
        // a target that splits the batch across data-parallel replicas compiles one replica's program
        let replicas = if resident { self.target.batch_multiple().max(1) } else { 1 };
        if batch % replicas != 0 {
            return Err(Error::InputMismatch(format!("a batch of {batch} rows cannot be split across {replicas} replicas")));
        }
        let batch = batch / replicas;
        let name_of = |g: &crate::Graph, v: crate::core::ir::ValueId| g.values[v.0].name.clone();
        let out_index = |g: &crate::Graph, n: &str| {
            g.outputs.iter().position(|&o| name_of(g, o) == n).ok_or_else(|| Error::InvalidModel(format!("the model lost its output '{n}'")))
        };
        let in_index = |g: &crate::Graph, n: &str| {
            g.inputs.iter().position(|&o| name_of(g, o) == n).ok_or_else(|| Error::InvalidModel(format!("the model lost its input '{n}'")))
        };
        // (index of the logits among the outputs, vocabulary, cache dtype)
        let logits_of = |g: &crate::Graph| -> Result<(usize, usize, Option<DType>)> {
            let at = out_index(g, &i.logits)?;
            let lv = &g.values[g.outputs[at].0];
            if lv.shape.len() != 3 || lv.shape[0] != batch || (lv.shape[1] != seq && lv.shape[1] != 1) {
                return Err(Error::Unsupported(format!("output 'logits' is {:?}; generate needs [batch, seq, vocab]", lv.shape)));
            }
            let kv_dtype = i.past.first().map(|kv| in_index(g, &kv.key)).transpose()?.map(|k| g.values[g.inputs[k].0].dtype);
            Ok((at, lv.shape[2], kv_dtype))
        };

        if resident {
            // the cache kept on the target, when it can keep values between calls
            let (rg, roles, links, in_place) = self.resident_graph(past, seq, batch)?;
            let (logits_at, vocab, kv_dtype) = logits_of(&rg)?;
            let batched: Vec<bool> = rg
                .inputs
                .iter()
                .map(|&v| matches!(roles.get(&name_of(&rg, v)), Some(Role::Ids | Role::Mask | Role::Positions | Role::Past(_) | Role::WriteIndex)))
                .collect();
            if let Some(exe) = self.target.prepare_resident(&rg, &links, &batched)? {
                let roles = rg
                    .inputs
                    .iter()
                    .filter_map(|&v| match roles.get(&name_of(&rg, v)) {
                        Some(Role::Past(_)) => None,
                        Some(&r) => Some(Ok(r)),
                        None => Some(Err(Error::Unsupported(format!("unexpected model input '{}'", name_of(&rg, v))))),
                    })
                    .collect::<Result<Vec<Role>>>()?;
                let linked: Vec<usize> = links.iter().map(|l| l.0).collect();
                let logits = (0..logits_at).filter(|o| !linked.contains(o)).count();
                return Ok(Program { exe: Exe::Resident(exe), roles, logits, present: Vec::new(), vocab, kv_dtype, in_place });
            }
        }
        // A host decode step updates the cache where it is, when the model has the usual Concat of its cache.
        let in_place_form = if self.mode == Mode::Bucketed && seq == 1 && past > 0 { self.in_place_graph(past, batch).ok() } else { None };
        let in_place = in_place_form.is_some();
        let (g, roles) = match in_place_form {
            Some(form) => form,
            None => self.load_graph(past, seq, batch)?,
        };
        let (logits_at, vocab, kv_dtype) = logits_of(&g)?;
        let cache_names: Vec<(&String, &String)> =
            i.past.iter().zip(&i.present).flat_map(|(p, q)| [(&p.key, &q.key), (&p.value, &q.value)]).collect();
        let roles: Vec<Role> = g
            .inputs
            .iter()
            .map(|&v| roles.get(&name_of(&g, v)).copied().ok_or_else(|| Error::Unsupported(format!("unexpected model input '{}'", name_of(&g, v)))))
            .collect::<Result<_>>()?;
        let present = cache_names.iter().map(|(_, q)| out_index(&g, q)).collect::<Result<Vec<_>>>()?;
        // One run on zeros before the first real one: buffers allocated and pages touched (a first run on the CPU
        // is several times slower), counted as compile time rather than as the prefill's.
        let zeros: Vec<Tensor> = g.inputs.iter().map(|&v| Tensor::zeros(g.values[v.0].dtype, g.values[v.0].shape.clone())).collect();
        let mut exe = self.target.prepare(g)?;
        exe.run(&zeros)?;
        let exe = Exe::Host(exe);
        Ok(Program { exe, roles, logits: logits_at, present, vocab, kv_dtype, in_place })
    }

    /// The decode program for a `past`-position cache in the in-place form ([`kv_cache::scatter_cache_in_place`]):
    /// loaded for `past - 1` cache positions, whose `present` has `past`, then rewritten so that the cache input
    /// has `past` positions too and the new one is written into it.
    fn in_place_graph(&self, past: usize, batch: usize) -> Result<(crate::Graph, HashMap<String, Role>)> {
        let (mut g, mut roles) = self.load_graph(past - 1, 1, batch)?;
        let pairs = self.cache_pairs(&g)?;
        kv_cache::scatter_cache_in_place(&mut g, &pairs)?;
        roles.insert(kv_cache::WRITE_INDEX_INPUT.to_string(), Role::WriteIndex);
        Ok((g, roles))
    }
}

/// The tokens of one generation, produced one step per [`Iterator::next`]: the first by the prefill, the
/// rest by decode steps. [`Tokens::finish`] gives the [`Generation`] with its timings.
///
/// Internally a generation runs a batch of prompts ([`Generator::generate_batch`]); the iterator is the
/// one-prompt view.
pub struct Tokens<'g> {
    g: &'g mut Generator,
    params: GenerateParams,
    rng: Rng,
    /// One per prompt (batch row).
    outs: Vec<Generation>,
    /// Left padding of each row's prompt (to the longest prompt), so every row's last token is at one position.
    pads: Vec<usize>,
    /// Rows still generating (a row stops at an end-of-sequence token; the batch runs while any row does).
    active: Vec<bool>,
    /// The rows that are prompts (the first ones); the rest fill the batch up to the target's multiple.
    real: usize,
    /// The token each row feeds next.
    last: Vec<i64>,
    /// Steps run (the prefill is step 0).
    steps: usize,
    cache: Option<KvCache>,
    /// the program holding the cache kept on the target
    holder: Option<Key>,
    compile0: Duration,
    done: bool,
}

/// A program: (cache positions, tokens, batch rows).
type Key = (usize, usize, usize);

impl Tokens<'_> {
    /// The generation so far (all of it once the iterator has ended).
    pub fn finish(self) -> Generation {
        self.finish_all().swap_remove(0)
    }

    /// The generation of every prompt of the batch so far.
    fn finish_all(mut self) -> Vec<Generation> {
        self.outs.truncate(self.real);
        let compile = self.g.compile_time - self.compile0;
        for o in &mut self.outs {
            o.compile = compile;
        }
        self.outs
    }

    /// The logits of the last step (empty before the first).
    pub fn last_logits(&self) -> Option<&[f32]> {
        self.outs[0].logits.last().map(|v| v.as_slice())
    }

    /// One step for the whole batch; each active row gets its token.
    fn step(&mut self) -> Result<()> {
        let first = self.steps == 0;
        let (rows, el) = match self.g.mode {
            Mode::NoCache => self.no_cache_step()?,
            Mode::Bucketed | Mode::Exact => self.cache_step(first)?,
        };
        self.steps += 1;
        for (r, logits) in rows.into_iter().enumerate() {
            if !self.active[r] {
                continue; // a finished row keeps feeding its last token; what it makes is dropped
            }
            let t = pick(&logits, &self.params.sampling, &mut self.rng) as i64;
            let out = &mut self.outs[r];
            if first {
                out.prefill += el;
            } else {
                out.decode += el;
                out.decode_steps += 1;
            }
            if self.g.options.keep_logits {
                out.logits.push(logits);
            }
            out.generated_ids.push(t);
            self.last[r] = t;
            if out.generated_ids.len() >= self.params.max_new_tokens || self.params.eos.contains(&t) {
                self.active[r] = false;
            }
        }
        if !self.active.iter().any(|&a| a) {
            self.done = true;
        }
        Ok(())
    }

    /// All tokens so far (one row: the no-cache form runs one prompt).
    fn sequence(&self) -> Vec<i64> {
        let mut s = self.outs[0].input_ids.clone();
        s.extend_from_slice(&self.outs[0].generated_ids);
        s
    }

    /// Runs the whole sequence, padded to a bucket; the logits at its last real token.
    fn no_cache_step(&mut self) -> Result<(Vec<Vec<f32>>, Duration)> {
        let seq = self.sequence();
        let n = seq.len();
        let s = self.g.bucket_at_least(n)?;
        let p = self.g.program(0, s, 1)?;
        check_ids(&seq, p.vocab)?;
        let mut inputs = Vec::with_capacity(p.roles.len());
        for r in &p.roles {
            inputs.push(match r {
                Role::Ids => ids_tensor(std::slice::from_ref(&seq), s),
                Role::Mask => mask(s, &[vec![(0, n)]]),
                Role::LogitsRow => Tensor::from_i64(vec![1], vec![n as i64 - 1]),
                Role::Positions | Role::Past(_) | Role::CacheLen | Role::NewCount | Role::WriteIndex => {
                    unreachable!("the no-cache form has no positions or cache inputs")
                }
            });
        }
        let Exe::Host(exe) = &mut p.exe else { unreachable!("only the bucketed cache form keeps its cache on the target") };
        let t0 = Instant::now();
        let outs = exe.run(&inputs)?;
        let el = t0.elapsed();
        Ok((vec![logits_row(&outs[p.logits], 0, n - 1, p.vocab)?], el))
    }

    /// A prefill (`first`) or decode step of a cache-form model, for every row.
    fn cache_step(&mut self, first: bool) -> Result<(Vec<Vec<f32>>, Duration)> {
        let exact = self.g.mode == Mode::Exact;
        let batch = self.outs.len();
        let prompt_len = self.outs.iter().map(|o| o.input_ids.len()).max().unwrap_or(0);
        // this step's tokens per row (prompts left-padded to the longest) and the cache length before it
        let (new_ids, len): (Vec<Vec<i64>>, usize) = if first {
            let rows = self.outs.iter().zip(&self.pads).map(|(o, &pad)| [vec![0; pad], o.input_ids.clone()].concat()).collect();
            (rows, 0)
        } else {
            (self.last.iter().map(|&t| vec![t]).collect(), prompt_len + self.steps - 1)
        };
        let n = new_ids[0].len();
        // A prefill whose cache stays on the host needs no cache positions yet: it runs on an empty past (the
        // present it returns is then only the prompt's positions), padded to a power of two, so a short prompt
        // does not pay for the attention over a whole bucket of empty positions.
        let host_prefill = first && !exact && !self.g.target.keeps_resident_values();
        let (past, seq) = if exact {
            (len, n)
        } else if host_prefill {
            (0, n.max(16).next_power_of_two().min(self.g.bucket_at_least(n)?))
        } else {
            let seq = if first { self.g.bucket_at_least(n)? } else { 1 };
            (self.g.bucket_at_least(len + n)?, seq)
        };
        // the bucket the host prefill's keys and values go to
        let prefill_capacity = if host_prefill { Some(self.g.bucket_at_least(n)?) } else { None };
        let (layers, heads, dim) = (self.g.interface.past.len(), self.g.interface.kv_heads.unwrap_or(0), self.g.interface.head_dim.unwrap_or(0));
        let key = (past, seq, batch);
        let p = self.g.program(past, seq, batch)?;
        for ids in &new_ids {
            check_ids(ids, p.vocab)?;
        }
        let dtype = p.kv_dtype.unwrap_or(DType::F32);
        if matches!(p.exe, Exe::Resident(_)) {
            self.move_resident_state(key, len)?;
        }
        let in_place = self.g.programs.get(&key).is_some_and(|p| p.in_place);
        let step = Step { new_ids: &new_ids, pads: &self.pads, seq, past, len, in_place };
        let p = self.g.programs.get_mut(&key).expect("compiled above");
        let rows = |outs: &[Tensor], logits: usize, vocab: usize| (0..batch).map(|r| logits_row(&outs[logits], r, n - 1, vocab)).collect::<Result<Vec<_>>>();
        if let Exe::Resident(exe) = &mut p.exe {
            let inputs: Vec<Tensor> = p.roles.iter().map(|&r| step.feed(r).expect("resident inputs are not given")).collect();
            let t0 = Instant::now();
            let outs = exe.run(&inputs)?;
            let el = t0.elapsed();
            return Ok((rows(&outs, p.logits, p.vocab)?, el));
        }
        let Exe::Host(exe) = &mut p.exe else { unreachable!("resident programs returned above") };
        let cache = self.cache.get_or_insert_with(|| KvCache::new(dtype, batch, layers, heads, dim, 0));
        if !exact && !host_prefill {
            cache.resize(past)?;
        }
        debug_assert_eq!(cache.len, len);
        let inputs: Vec<Tensor> = p
            .roles
            .iter()
            .map(|&r| match r {
                Role::Past(k) => std::mem::take(&mut cache.tensors[k]),
                r => step.feed(r).expect("every other input is fed by Step::feed"),
            })
            .collect();
        if in_place {
            // the cache goes in by value and comes back as `present`, the new position written in
            let t0 = Instant::now();
            let mut outs = exe.run_owned(inputs)?;
            let el = t0.elapsed();
            let logits = rows(&outs, p.logits, p.vocab)?;
            for (k, &o) in p.present.iter().enumerate() {
                cache.tensors[k] = std::mem::take(&mut outs[o]);
            }
            cache.len += n;
            return Ok((logits, el));
        }
        let t0 = Instant::now();
        let result = exe.run(&inputs);
        let el = t0.elapsed();
        // the cache tensors go back whatever happened
        for (r, t) in p.roles.iter().zip(inputs) {
            if let Role::Past(k) = *r {
                cache.tensors[k] = t;
            }
        }
        let mut outs = result?;
        let logits = rows(&outs, p.logits, p.vocab)?;
        if exact {
            for (k, &o) in p.present.iter().enumerate() {
                cache.tensors[k] = std::mem::take(&mut outs[o]);
            }
            cache.len += n;
        } else {
            if let Some(capacity) = prefill_capacity {
                cache.resize(capacity)?;
            }
            let present: Vec<&Tensor> = p.present.iter().map(|&o| &outs[o]).collect();
            cache.append(&present, past, n)?;
        }
        Ok((logits, el))
    }

    /// Gives the cache kept on the target to the program `key` before it runs: moved from the program that holds it
    /// when the capacity is the same (no copy), through the host when the cache grows to a larger bucket, or zeros
    /// at the start.
    fn move_resident_state(&mut self, key: Key, len: usize) -> Result<()> {
        if self.holder == Some(key) {
            return Ok(());
        }
        fn resident(g: &mut Generator, k: Key) -> Result<&mut Box<dyn ResidentExecutable>> {
            match g.programs.get_mut(&k).map(|p| &mut p.exe) {
                Some(Exe::Resident(e)) => Ok(e),
                _ => Err(Error::InvalidModel("the program holding the cache is gone".into())),
            }
        }
        match self.holder {
            None => {
                let exe = resident(self.g, key)?;
                let zeros: Vec<Tensor> = exe.state_types().into_iter().map(|(d, s)| Tensor::zeros(d, s)).collect();
                exe.set_state(&zeros)?;
            }
            Some(old) if old.0 == key.0 => {
                let st = resident(self.g, old)?.take_state()?;
                resident(self.g, key)?.put_state(st)?;
            }
            Some(old) => {
                let tensors = resident(self.g, old)?.state_to_host()?;
                let mut cache = KvCache { tensors, len };
                cache.resize(key.0)?;
                resident(self.g, key)?.set_state(&cache.tensors)?;
            }
        }
        self.holder = Some(key);
        Ok(())
    }
}

impl Iterator for Tokens<'_> {
    type Item = Result<i64>;

    fn next(&mut self) -> Option<Result<i64>> {
        if self.done {
            return None;
        }
        let before = self.outs[0].generated_ids.len();
        match self.step() {
            Ok(()) => self.outs[0].generated_ids.get(before).copied().map(Ok),
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

/// One step of a cache-form model over a batch: `new_ids` per row (`n` tokens each, padded to `seq`), after `len`
/// filled positions of a `past`-position cache; row r's first `pads[r]` prompt positions are left padding.
struct Step<'a> {
    new_ids: &'a [Vec<i64>],
    pads: &'a [usize],
    seq: usize,
    past: usize,
    len: usize,
    /// the program is in the in-place form: the mask is laid out like the cache, the new positions at `len`
    in_place: bool,
}

impl Step<'_> {
    /// What feeds input `role`; `None` for the cache itself.
    fn feed(&self, role: Role) -> Option<Tensor> {
        let (seq, past, len) = (self.seq, self.past, self.len);
        let n = self.new_ids[0].len();
        let b = self.new_ids.len();
        Some(match role {
            Role::Ids => ids_tensor(self.new_ids, seq),
            // per row: the filled cache positions after its padding, and this step's real tokens (after the `past`
            // cache positions; a prefill's left padding excluded)
            Role::Mask if self.in_place => {
                let rows: Vec<Vec<(usize, usize)>> = self.pads.iter().map(|&pad| vec![(pad.min(len), len + n)]).collect();
                mask(past, &rows)
            }
            Role::Mask => {
                let rows: Vec<Vec<(usize, usize)>> = self
                    .pads
                    .iter()
                    .map(|&pad| if len == 0 { vec![(past + pad, past + n)] } else { vec![(pad.min(len), len), (past, past + n)] })
                    .collect();
                mask(past + seq, &rows)
            }
            // true positions, counted from each row's first real token
            Role::Positions => Tensor::from_i64(
                vec![b, seq],
                self.pads.iter().flat_map(|&pad| (0..seq).map(move |k| (len + k).saturating_sub(pad) as i64)).collect(),
            ),
            Role::CacheLen => Tensor::from_i64(vec![1], vec![len as i64]),
            Role::NewCount => Tensor::from_i64(vec![1], vec![n as i64]),
            Role::LogitsRow => Tensor::from_i64(vec![1], vec![n as i64 - 1]),
            Role::WriteIndex => Tensor::from_i64(vec![b], vec![len as i64; b]),
            Role::Past(_) => return None,
        })
    }
}

fn check_ids(ids: &[i64], vocab: usize) -> Result<()> {
    match ids.iter().find(|&&t| t < 0 || t as u64 >= vocab as u64) {
        Some(t) => Err(Error::InputMismatch(format!("token id {t} is outside the model's vocabulary (0..{vocab})"))),
        None => Ok(()),
    }
}

/// Each row of `rows` padded with 0 to `len`, as `[rows, len]`.
fn ids_tensor(rows: &[Vec<i64>], len: usize) -> Tensor {
    let mut v = Vec::with_capacity(rows.len() * len);
    for r in rows {
        v.extend_from_slice(r);
        v.resize(v.len() + len - r.len(), 0);
    }
    Tensor::from_i64(vec![rows.len(), len], v)
}

/// A `[rows, len]` mask with ones on each row's ranges.
fn mask(len: usize, rows: &[Vec<(usize, usize)>]) -> Tensor {
    let mut v = vec![0i64; rows.len() * len];
    for (row, ones) in v.chunks_mut(len.max(1)).zip(rows) {
        for &(a, b) in ones {
            row[a..b].iter_mut().for_each(|x| *x = 1);
        }
    }
    Tensor::from_i64(vec![rows.len(), len], v)
}

/// Position `row` of batch row `b` of logits `[batch, seq, vocab]` as f32 (the only position when the program
/// computes one).
fn logits_row(t: &Tensor, b: usize, row: usize, vocab: usize) -> Result<Vec<f32>> {
    let row = if t.shape.get(1) == Some(&1) { 0 } else { row };
    if t.shape.len() != 3 || t.shape[2] != vocab || row >= t.shape[1] || b >= t.shape[0] {
        return Err(Error::InvalidModel(format!("logits of shape {:?}, expected [>{b}, >{row}, {vocab}]", t.shape)));
    }
    let at = (b * t.shape[1] + row) * vocab;
    match t.as_f32() {
        Some(v) => Ok(v[at..at + vocab].to_vec()),
        None => Ok(t.to_f64_vec()[at..at + vocab].iter().map(|&x| x as f32).collect()),
    }
}

//! A program whose linked outputs stay in device memory and feed its linked inputs on the next call (a
//! generation's key/value cache): compiled with input/output aliasing (`tf.aliasing_output`), so XLA writes each
//! linked output into the donated buffer of its input, and the host sees only the other inputs and outputs.
//!
//! With the target's `--replicas N` the program is one replica's and the batch is split across N data-parallel
//! replicas: each device holds the resident values of its rows (the inputs the caller marks as batched are split
//! along axis 0; the others, such as a step's cache length, go whole to every device), and the outputs the host
//! sees are joined along axis 0.
//! With `--shard`, each replica is an SPMD program over several devices with its weights split; the resident
//! values are replicated across a replica's devices, each updating its own copy in place.

use tpu_sdk_core::ir::{DType, Graph, Tensor};
use tpu_sdk_core::target::{ResidentExecutable, ResidentLink, ResidentState, Transfers};

use crate::error::{Error, Result};
use crate::pjrt::Buffer;
use crate::target::{CloudTpuTarget, ReplicatedExecutable};
use crate::tensor_split;

/// See the module doc. Built by `CloudTpuTarget`'s `Target::prepare_resident`.
pub struct CloudTpuResident {
    exe: ReplicatedExecutable,
    /// Data-parallel replicas, and devices per replica (tensor-parallel partitions).
    replicas: usize,
    parts: usize,
    /// Each input as the caller sees it: name, dtype, whole-batch shape (graph order).
    inputs: Vec<(String, DType, Vec<usize>)>,
    /// Each input's shape on one device (the batch divided among the replicas where `split`).
    device_shapes: Vec<Vec<usize>>,
    /// Whether each input's axis 0 is split across the replicas.
    split: Vec<bool>,
    outputs: usize,
    links: Vec<ResidentLink>,
    /// Per link, one buffer per device (replica-major); `None` before any value is set.
    state: Vec<Option<Vec<Buffer>>>,
    transfers: Transfers,
}

impl std::fmt::Debug for CloudTpuResident {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CloudTpuResident({} links, {} replica(s) × {} device(s))", self.links.len(), self.replicas, self.parts)
    }
}

fn bytes(t: &Tensor) -> u64 {
    (t.len() * t.dtype().size_bytes()) as u64
}

impl CloudTpuResident {
    /// Compiles `graph` with each `(output, input)` of `links` aliased, for the target's replicas and shard plan
    /// (one device when it has neither). With N replicas `graph` is one replica's program and the inputs marked in
    /// `batched` take N times its batch (see `Target::prepare_resident`).
    pub fn new(target: &CloudTpuTarget, graph: &Graph, links: &[ResidentLink], batched: &[bool]) -> Result<CloudTpuResident> {
        for (k, &(o, i)) in links.iter().enumerate() {
            if links[..k].iter().any(|&(o2, i2)| o2 == o || i2 == i) {
                return Err(Error::Invalid(format!("resident link {k} ({o} → {i}) repeats an output or input")));
            }
        }
        if batched.len() != graph.inputs.len() {
            return Err(Error::Invalid(format!("{} batch flags for {} inputs", batched.len(), graph.inputs.len())));
        }
        let converted;
        let graph = match target.compute_dtype {
            None | Some(DType::F32) => graph,
            Some(DType::BF16) => {
                let (outs, ins): (Vec<usize>, Vec<usize>) = links.iter().copied().unzip();
                converted = crate::bf16::to_bf16_keeping(graph, &ins, &outs);
                &converted
            }
            Some(d) => return Err(Error::Invalid(format!("cloud-tpu computes in f32 or bf16, not {d}"))),
        };
        let n = target.replicas.max(1);
        let split: Vec<bool> = graph.inputs.iter().zip(batched).map(|(&i, &b)| n > 1 && b && !graph.value(i).shape.is_empty()).collect();
        if n > 1 {
            if let Some(&o) = graph.outputs.iter().find(|&&o| graph.value(o).shape.is_empty()) {
                return Err(Error::Invalid(format!("--replicas {n}: output '{}' is a scalar, so the replicas' outputs cannot be joined", graph.value(o).name)));
            }
        }
        let plan = target.replica_plan(graph, n, &target.shard)?;
        let exe = target.build_aliased(graph, n, plan.as_ref(), links)?;
        let parts = exe.devices.len() / n;
        let inputs = graph
            .inputs
            .iter()
            .zip(&split)
            .map(|(&i, &s)| {
                let v = graph.value(i);
                let mut shape = v.shape.clone();
                if s {
                    shape[0] *= n;
                }
                (v.name.clone(), v.dtype, shape)
            })
            .collect();
        let device_shapes = graph.inputs.iter().map(|&i| graph.value(i).shape.clone()).collect();
        Ok(CloudTpuResident {
            exe,
            replicas: n,
            parts,
            inputs,
            device_shapes,
            split,
            outputs: graph.outputs.len(),
            links: links.to_vec(),
            state: links.iter().map(|_| None).collect(),
            transfers: Transfers::default(),
        })
    }

    /// The device addresses of the resident values (link order, first device; `None` where there is none): a
    /// donated buffer that an aliased output reused keeps its address from call to call.
    pub fn state_addresses(&self) -> Result<Vec<Option<usize>>> {
        self.state.iter().map(|b| b.as_ref().and_then(|v| v.first()).map(Buffer::device_address).transpose()).collect()
    }

    /// Uploads input `i`'s host tensor `t` to every device: its replica's share of the batch, or all of it.
    fn upload_to_devices(&mut self, i: usize, t: &Tensor) -> Result<Vec<Buffer>> {
        let pieces = self.split[i].then(|| tensor_split::split(t, 0, self.replicas));
        let mut bufs = Vec::with_capacity(self.exe.devices.len());
        for (d, device) in self.exe.devices.iter().enumerate() {
            let piece = pieces.as_ref().map_or(t, |p| &p[d / self.parts]);
            self.transfers.uploads += 1;
            self.transfers.upload_bytes += bytes(piece);
            bufs.push(self.exe.client.upload(piece, device)?);
        }
        Ok(bufs)
    }

    /// The host tensor of a value held on every device: each replica's first device's piece, joined along axis 0.
    fn download_joined(&mut self, bufs: &[Buffer], split: bool) -> Result<Tensor> {
        let replicas = if split { self.replicas } else { 1 };
        let mut pieces = Vec::with_capacity(replicas);
        for r in 0..replicas {
            let t = bufs[r * self.parts].to_tensor()?;
            self.transfers.downloads += 1;
            self.transfers.download_bytes += bytes(&t);
            pieces.push(t);
        }
        if pieces.len() == 1 {
            return Ok(pieces.pop().expect("one piece"));
        }
        tensor_split::concat0(&pieces).ok_or_else(|| Error::Invalid("the replicas' pieces of an output cannot be joined".into()))
    }

    fn link_of_input(&self, i: usize) -> Option<usize> {
        self.links.iter().position(|&(_, input)| input == i)
    }

    fn check_state_shapes(&self, state: &[Tensor]) -> Result<()> {
        if state.len() != self.links.len() {
            return Err(Error::InputMismatch(format!("{} resident values given for {} links", state.len(), self.links.len())));
        }
        for (t, &(_, i)) in state.iter().zip(&self.links) {
            let (name, dtype, shape) = &self.inputs[i];
            if t.dtype() != *dtype || t.shape != *shape {
                return Err(Error::InputMismatch(format!("resident input '{name}' is {dtype}{shape:?}, given {}{:?}", t.dtype(), t.shape)));
            }
        }
        Ok(())
    }

    fn execute(&mut self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        let free: Vec<usize> = (0..self.inputs.len()).filter(|&i| self.link_of_input(i).is_none()).collect();
        if inputs.len() != free.len() {
            let names: Vec<&str> = free.iter().map(|&i| self.inputs[i].0.as_str()).collect();
            return Err(Error::InputMismatch(format!("the program takes {} input(s) besides its resident ones [{}], {} given", free.len(), names.join(", "), inputs.len())));
        }
        for (t, &i) in inputs.iter().zip(&free) {
            let (name, dtype, shape) = &self.inputs[i];
            if t.dtype() != *dtype || t.shape != *shape {
                return Err(Error::InputMismatch(format!("input '{name}': expected {dtype}{shape:?}, given {}{:?}", t.dtype(), t.shape)));
            }
        }
        // per free input, one buffer per device
        let mut uploaded = Vec::with_capacity(inputs.len());
        for (t, &i) in inputs.iter().zip(&free) {
            uploaded.push(self.upload_to_devices(i, t)?);
        }
        // the resident buffers are moved in: their inputs are donated to the aliased outputs
        let mut donated = Vec::with_capacity(self.links.len());
        for (k, s) in self.state.iter_mut().enumerate() {
            donated.push(s.take().ok_or_else(|| Error::InputMismatch(format!("resident input '{}' has no value: set_state first", self.inputs[self.links[k].1].0)))?);
        }
        let devices = self.exe.devices.len();
        let args: Vec<Vec<&Buffer>> = (0..devices)
            .map(|d| {
                let mut next = uploaded.iter();
                let mut list: Vec<&Buffer> = (0..self.inputs.len())
                    .map(|i| match self.link_of_input(i) {
                        Some(k) => &donated[k][d],
                        None => &next.next().expect("one upload per free input")[d],
                    })
                    .collect();
                list.extend(self.exe.params[d].iter());
                list
            })
            .collect();
        let outs = self.exe.exe.execute_replicated(&args)?;
        drop(args);
        drop(donated);
        // per output, one buffer per device
        let mut per_output: Vec<Vec<Buffer>> = (0..self.outputs).map(|_| Vec::with_capacity(devices)).collect();
        for device_outs in outs {
            if device_outs.len() != self.outputs {
                return Err(Error::Invalid(format!("the program returned {} outputs, the model has {}", device_outs.len(), self.outputs)));
            }
            for (o, b) in device_outs.into_iter().enumerate() {
                per_output[o].push(b);
            }
        }
        let mut result = Vec::new();
        for (o, bufs) in per_output.into_iter().enumerate() {
            match self.links.iter().position(|&(out, _)| out == o) {
                Some(k) => self.state[k] = Some(bufs),
                None => result.push(self.download_joined(&bufs, self.replicas > 1)?),
            }
        }
        Ok(result)
    }
}

impl ResidentExecutable for CloudTpuResident {
    fn run(&mut self, inputs: &[Tensor]) -> tpu_sdk_core::Result<Vec<Tensor>> {
        Ok(self.execute(inputs)?)
    }

    fn set_state(&mut self, state: &[Tensor]) -> tpu_sdk_core::Result<()> {
        self.check_state_shapes(state)?;
        let mut bufs = Vec::with_capacity(state.len());
        for (k, t) in state.iter().enumerate() {
            bufs.push(Some(self.upload_to_devices(self.links[k].1, t)?));
        }
        self.state = bufs;
        Ok(())
    }

    fn state_to_host(&mut self) -> tpu_sdk_core::Result<Vec<Tensor>> {
        let mut out = Vec::with_capacity(self.state.len());
        for k in 0..self.state.len() {
            let bufs = self.state[k].take().ok_or_else(|| Error::InputMismatch("no resident value to copy".into()))?;
            let before = self.transfers.downloads;
            let joined = self.download_joined(&bufs, self.split[self.links[k].1]);
            self.state[k] = Some(bufs);
            self.transfers.state_downloads += self.transfers.downloads - before;
            out.push(joined?);
        }
        Ok(out)
    }

    fn take_state(&mut self) -> tpu_sdk_core::Result<ResidentState> {
        let bufs: Vec<Option<Vec<Buffer>>> = std::mem::replace(&mut self.state, self.links.iter().map(|_| None).collect());
        Ok(ResidentState(Box::new(bufs)))
    }

    fn put_state(&mut self, state: ResidentState) -> tpu_sdk_core::Result<()> {
        let bufs = state.0.downcast::<Vec<Option<Vec<Buffer>>>>().map_err(|_| Error::Invalid("resident values from another kind of executable".into()))?;
        if bufs.len() != self.links.len() {
            return Err(Error::InputMismatch(format!("{} resident values for {} links", bufs.len(), self.links.len())).into());
        }
        for (b, &(_, i)) in bufs.iter().zip(&self.links) {
            let Some(b) = b else { continue };
            let (name, dtype, _) = &self.inputs[i];
            let shape = &self.device_shapes[i];
            if b.len() != self.exe.devices.len() {
                return Err(Error::InputMismatch(format!("resident input '{name}' put in from {} device(s), this program runs on {}", b.len(), self.exe.devices.len())).into());
            }
            for d in b {
                if d.dtype()? != *dtype || d.dims()? != *shape {
                    return Err(Error::InputMismatch(format!("resident input '{name}' is {dtype}{shape:?} per device, the value put in is not")).into());
                }
            }
        }
        self.state = *bufs;
        Ok(())
    }

    fn transfers(&self) -> Transfers {
        self.transfers
    }

    fn state_types(&self) -> Vec<(DType, Vec<usize>)> {
        self.links.iter().map(|&(_, i)| (self.inputs[i].1, self.inputs[i].2.clone())).collect()
    }
}

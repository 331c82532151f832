//! A program whose linked outputs stay in device memory and feed its linked inputs on the next call (a
//! generation's key/value cache): compiled with input/output aliasing (`tf.aliasing_output`), so XLA writes each
//! linked output into the donated buffer of its input, and the host sees only the other inputs and outputs.

use tpu_sdk_core::ir::{DType, Graph, Tensor};
use tpu_sdk_core::target::{ResidentExecutable, ResidentLink, ResidentState, Transfers};

use crate::error::{Error, Result};
use crate::pjrt::Buffer;
use crate::target::{CloudTpuTarget, ReplicatedExecutable};

/// See the module doc. Built by `CloudTpuTarget`'s `Target::prepare_resident`.
pub struct CloudTpuResident {
    exe: ReplicatedExecutable,
    inputs: Vec<(String, DType, Vec<usize>)>,
    outputs: usize,
    links: Vec<ResidentLink>,
    state: Vec<Option<Buffer>>,
    transfers: Transfers,
}

impl std::fmt::Debug for CloudTpuResident {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CloudTpuResident({} links)", self.links.len())
    }
}

fn bytes(t: &Tensor) -> u64 {
    (t.len() * t.dtype().size_bytes()) as u64
}

impl CloudTpuResident {
    /// Compiles `graph` for one device with each `(output, input)` of `links` aliased.
    pub fn new(target: &CloudTpuTarget, graph: &Graph, links: &[ResidentLink]) -> Result<CloudTpuResident> {
        for (k, &(o, i)) in links.iter().enumerate() {
            if links[..k].iter().any(|&(o2, i2)| o2 == o || i2 == i) {
                return Err(Error::Invalid(format!("resident link {k} ({o} → {i}) repeats an output or input")));
            }
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
        let exe = target.build_aliased(graph, 1, None, links)?;
        let inputs = graph.inputs.iter().map(|&i| (graph.value(i).name.clone(), graph.value(i).dtype, graph.value(i).shape.clone())).collect();
        Ok(CloudTpuResident { exe, inputs, outputs: graph.outputs.len(), links: links.to_vec(), state: links.iter().map(|_| None).collect(), transfers: Transfers::default() })
    }

    /// The device addresses of the resident values (link order; `None` where there is none): a donated buffer
    /// that an aliased output reused keeps its address from call to call.
    pub fn state_addresses(&self) -> Result<Vec<Option<usize>>> {
        self.state.iter().map(|b| b.as_ref().map(Buffer::device_address).transpose()).collect()
    }

    fn upload(&mut self, t: &Tensor) -> Result<Buffer> {
        self.transfers.uploads += 1;
        self.transfers.upload_bytes += bytes(t);
        self.exe.client.upload(t, &self.exe.devices[0])
    }

    fn download(&mut self, b: &Buffer) -> Result<Tensor> {
        let t = b.to_tensor()?;
        self.transfers.downloads += 1;
        self.transfers.download_bytes += bytes(&t);
        Ok(t)
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
        let mut uploaded = Vec::with_capacity(inputs.len());
        for t in inputs {
            uploaded.push(self.upload(t)?);
        }
        // the resident buffers are moved in: their inputs are donated to the aliased outputs
        let mut donated = Vec::with_capacity(self.links.len());
        for (k, s) in self.state.iter_mut().enumerate() {
            donated.push(s.take().ok_or_else(|| Error::InputMismatch(format!("resident input '{}' has no value: set_state first", self.inputs[self.links[k].1].0)))?);
        }
        let mut args: Vec<&Buffer> = Vec::with_capacity(self.inputs.len() + self.exe.params[0].len());
        let mut next = uploaded.iter();
        for i in 0..self.inputs.len() {
            match self.links.iter().position(|&(_, input)| input == i) {
                Some(k) => args.push(&donated[k]),
                None => args.push(next.next().expect("counted above")),
            }
        }
        args.extend(self.exe.params[0].iter());
        let outs = self.exe.exe.execute(&args, None)?;
        drop(args);
        drop(donated);
        if outs.len() != self.outputs {
            return Err(Error::Invalid(format!("the program returned {} outputs, the model has {}", outs.len(), self.outputs)));
        }
        let mut result = Vec::new();
        for (o, b) in outs.into_iter().enumerate() {
            match self.links.iter().position(|&(out, _)| out == o) {
                Some(k) => self.state[k] = Some(b),
                None => result.push(self.download(&b)?),
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
        for t in state {
            bufs.push(Some(self.upload(t)?));
        }
        self.state = bufs;
        Ok(())
    }

    fn state_to_host(&mut self) -> tpu_sdk_core::Result<Vec<Tensor>> {
        let mut out = Vec::with_capacity(self.state.len());
        for b in &self.state {
            let b = b.as_ref().ok_or_else(|| Error::InputMismatch("no resident value to copy".into()))?;
            out.push(b.to_tensor()?);
        }
        for t in &out {
            self.transfers.downloads += 1;
            self.transfers.download_bytes += bytes(t);
            self.transfers.state_downloads += 1;
        }
        Ok(out)
    }

    fn take_state(&mut self) -> tpu_sdk_core::Result<ResidentState> {
        let bufs: Vec<Option<Buffer>> = std::mem::replace(&mut self.state, self.links.iter().map(|_| None).collect());
        Ok(ResidentState(Box::new(bufs)))
    }

    fn put_state(&mut self, state: ResidentState) -> tpu_sdk_core::Result<()> {
        let bufs = state.0.downcast::<Vec<Option<Buffer>>>().map_err(|_| Error::Invalid("resident values from another kind of executable".into()))?;
        if bufs.len() != self.links.len() {
            return Err(Error::InputMismatch(format!("{} resident values for {} links", bufs.len(), self.links.len())).into());
        }
        for (b, &(_, i)) in bufs.iter().zip(&self.links) {
            let Some(b) = b else { continue };
            let (name, dtype, shape) = &self.inputs[i];
            if b.dtype()? != *dtype || b.dims()? != *shape {
                return Err(Error::InputMismatch(format!("resident input '{name}' is {dtype}{shape:?}, the value put in is not")).into());
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

//! The owning handle of a device buffer: its element type and dimensions, and the copy back to the host.

use super::*;

/// An owned device buffer.
pub(crate) struct BufferHandle {
    pub(super) client: Arc<ClientHandle>,
    pub(super) raw: *mut PJRT_Buffer,
}

// SAFETY: PjRtBuffer is thread-safe; the pointer is owned and its client kept alive by the handle.
unsafe impl Send for BufferHandle {}
// SAFETY: as above.
unsafe impl Sync for BufferHandle {}

destroy_on_drop!(BufferHandle, PJRT_Buffer_Destroy, PJRT_Buffer_Destroy_Args.buffer, client.api);

impl BufferHandle {
    pub(super) fn wrap(client: &Arc<ClientHandle>, raw: *mut PJRT_Buffer) -> Result<BufferHandle> {
        non_null(raw, "the plugin reported success but returned no buffer")?;
        Ok(BufferHandle { client: client.clone(), raw })
    }

    /// `PJRT_Buffer_Type` of the elements.
    pub(crate) fn element_type(&self) -> Result<i32> {
        let a = query!(&self.client.api, PJRT_Buffer_ElementType, PJRT_Buffer_ElementType_Args { buffer: self.raw })?;
        Ok(a.type_)
    }

    pub(crate) fn dims(&self) -> Result<Vec<i64>> {
        let a = query!(&self.client.api, PJRT_Buffer_Dimensions, PJRT_Buffer_Dimensions_Args { buffer: self.raw })?;
        if a.dims.is_null() || a.num_dims == 0 {
            return Ok(Vec::new());
        }
        // SAFETY: the dims array is owned by the buffer (alive: `self`) and has `num_dims` entries.
        Ok(unsafe { std::slice::from_raw_parts(a.dims, a.num_dims) }.to_vec())
    }

    /// `PJRT_Buffer_UnsafePointer`: the device memory address of the buffer (an opaque number, compared only).
    pub(crate) fn device_address(&self) -> Result<usize> {
        let a = query!(&self.client.api, PJRT_Buffer_UnsafePointer, PJRT_Buffer_UnsafePointer_Args { buffer: self.raw })?;
        Ok(a.buffer_pointer)
    }

    /// `PJRT_Buffer_ToHostBuffer` into `dst` with a dense row-major host layout; waits for the copy.
    pub(crate) fn to_host(&self, dst: &mut [u8]) -> Result<()> {
        let rank = self.dims()?.len();
        let minor_to_major: Vec<i64> = (0..rank as i64).rev().collect();
        let mut layout = PJRT_Buffer_MemoryLayout::new();
        layout.type_ = LAYOUT_TILED;
        let mut tiled = PJRT_Buffer_MemoryLayout_Tiled::new();
        tiled.minor_to_major = minor_to_major.as_ptr();
        tiled.minor_to_major_size = rank;
        layout.value.tiled = tiled;
        // First ask for the size the host copy needs.
        let q = query!(&self.client.api, PJRT_Buffer_ToHostBuffer, PJRT_Buffer_ToHostBuffer_Args {
            src: self.raw,
            host_layout: &mut layout,
        })?;
        if !q.event.is_null() {
            self.client.api.destroy_event(q.event);
        }
        if q.dst_size != dst.len() {
            return Err(Error::Invalid(format!(
                "the device buffer holds {} bytes but the host tensor has {}",
                q.dst_size,
                dst.len()
            )));
        }
        let a = query!(&self.client.api, PJRT_Buffer_ToHostBuffer, PJRT_Buffer_ToHostBuffer_Args {
            src: self.raw,
            host_layout: &mut layout,
            dst: dst.as_mut_ptr().cast(),
            dst_size: dst.len(),
        })?;
        // `dst` stays borrowed until the copy has finished.
        self.client.api.await_event(a.event, "PJRT_Buffer_ToHostBuffer")
    }
}

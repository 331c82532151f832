//! The emitter's ops with regions or many operands: reductions (`reduce`, `reduce_window`, arg-reductions),
//! `dot_general`, `gather`/`scatter` and `top_k`, written in the generic form where the pretty one does not exist.

use tpu_sdk_core::ir::DType;

use super::literal::window_attrs;
use super::{compare_type, highest, i64_array, list, lowest, ty, Combine, Cx, V};

impl Cx<'_> {
    /// Reduction over `dims` (removed from the shape).
    pub fn reduce(&mut self, a: &V, dims: &[usize], combine: Combine) -> V {
        if dims.is_empty() {
            return a.clone();
        }
        let init = self.scalar(combine.init(a.dtype), a.dtype);
        let shape: Vec<usize> = (0..a.rank()).filter(|d| !dims.contains(d)).map(|d| a.shape[d]).collect();
        let out = ty(a.dtype, &shape);
        self.emit(
            format!(
                "stablehlo.reduce({} init: {}) applies {} across dimensions = {} : ({}, {}) -> {out}",
                a.name,
                init.name,
                combine.op(),
                list(dims),
                a.ty(),
                init.ty()
            ),
            a.dtype,
            shape,
        )
    }

    /// Reduction over `dims` keeping them as size-1 dims.
    pub fn reduce_keep(&mut self, a: &V, dims: &[usize], combine: Combine) -> V {
        let r = self.reduce(a, dims, combine);
        let kept: Vec<usize> = (0..a.rank()).map(|d| if dims.contains(&d) { 1 } else { a.shape[d] }).collect();
        self.reshape(&r, &kept)
    }

    /// `reduce_window` with padding value = the combine's identity.
    #[allow(clippy::too_many_arguments)]
    pub fn reduce_window(
        &mut self,
        a: &V,
        combine: Combine,
        window: &[usize],
        strides: &[usize],
        dilations: &[usize],
        padding: &[(usize, usize)],
        out_shape: &[usize],
    ) -> V {
        let init = self.scalar(combine.init(a.dtype), a.dtype);
        let st = ty(a.dtype, &[]);
        let name = format!("%v{}", self.next);
        self.next += 1;
        let out = ty(a.dtype, out_shape);
        let loc = self.loc.clone();
        self.line(format_args!("    {name} = \"stablehlo.reduce_window\"({}, {}) ({{", a.name, init.name));
        self.line(format_args!("    ^bb0(%ra: {st}, %rb: {st}):"));
        self.line(format_args!("      %rc = {} %ra, %rb : {st}", combine.op()));
        self.line(format_args!("      stablehlo.return %rc : {st}"));
        let attrs = window_attrs(window, strides, dilations, padding);
        self.line(format_args!("    }}) {attrs} : ({}, {st}) -> {out}{loc}", a.ty()));
        V { name, dtype: a.dtype, shape: out_shape.to_vec() }
    }

    /// Max `reduce_window` that also gives, per window, the flat (row-major) input index of its maximum; ties go to
    /// the smallest index, padding cells never win. A two-operand `reduce_window` over (value, iota).
    #[allow(clippy::too_many_arguments)]
    pub fn reduce_window_argmax(
        &mut self,
        a: &V,
        window: &[usize],
        strides: &[usize],
        dilations: &[usize],
        padding: &[(usize, usize)],
        out_shape: &[usize],
    ) -> (V, V) {
        let total: usize = a.shape.iter().product();
        let flat = self.iota(0, DType::I64, &[total]);
        let idx = self.reshape(&flat, &a.shape.clone());
        let init_v = self.scalar(lowest(a.dtype), a.dtype);
        let init_i = self.scalar(i64::MAX as f64, DType::I64);
        let st = ty(a.dtype, &[]);
        let it = ty(DType::I64, &[]);
        let name = format!("%v{}", self.next);
        self.next += 1;
        let loc = self.loc.clone();
        self.line(format_args!("    {name}:2 = \"stablehlo.reduce_window\"({}, {}, {}, {}) ({{", a.name, idx.name, init_v.name, init_i.name));
        self.arg_select_region(a.dtype, "GT", "LT");
        let attrs = window_attrs(window, strides, dilations, padding);
        self.line(format_args!(
            "    }}) {attrs} : ({}, {}, {st}, {it}) -> ({}, {}){loc}",
            a.ty(),
            idx.ty(),
            ty(a.dtype, out_shape),
            ty(DType::I64, out_shape)
        ));
        (
            V { name: format!("{name}#0"), dtype: a.dtype, shape: out_shape.to_vec() },
            V { name: format!("{name}#1"), dtype: DType::I64, shape: out_shape.to_vec() },
        )
    }

    /// `dot_general` with batch and contracting dims; the result is [batch..., lhs free..., rhs free...].
    pub fn dot_general(&mut self, a: &V, b: &V, batch: (&[usize], &[usize]), contract: (&[usize], &[usize])) -> V {
        let p = self.opts.precision;
        self.dot_general_with(a, b, batch, contract, p)
    }

    /// `dot_general` with an explicit precision.
    pub fn dot_general_with(
        &mut self,
        a: &V,
        b: &V,
        batch: (&[usize], &[usize]),
        contract: (&[usize], &[usize]),
        precision: crate::lower::Precision,
    ) -> V {
        let mut shape: Vec<usize> = batch.0.iter().map(|&d| a.shape[d]).collect();
        shape.extend((0..a.rank()).filter(|d| !batch.0.contains(d) && !contract.0.contains(d)).map(|d| a.shape[d]));
        shape.extend((0..b.rank()).filter(|d| !batch.1.contains(d) && !contract.1.contains(d)).map(|d| b.shape[d]));
        let out = ty(a.dtype, &shape);
        let batching = if batch.0.is_empty() { String::new() } else { format!("batching_dims = {} x {}, ", list(batch.0), list(batch.1)) };
        let precision = precision.attr_dot(a.dtype);
        self.emit(
            format!(
                "stablehlo.dot_general {}, {}, {batching}contracting_dims = {} x {}{precision} : ({}, {}) -> {out}",
                a.name,
                b.name,
                list(contract.0),
                list(contract.1),
                a.ty(),
                b.ty()
            ),
            a.dtype,
            shape,
        )
    }

    /// `is_finite` (i1 result).
    pub fn is_finite(&mut self, a: &V) -> V {
        let out = ty(DType::Bool, &a.shape);
        self.emit(format!("stablehlo.is_finite {} : ({}) -> {out}", a.name, a.ty()), DType::Bool, a.shape.clone())
    }

    /// The region of a two-operand (value, i64 index) reduction that keeps the pair whose value compares `better`
    /// (GT: maximum, LT: minimum), on equal values the one whose index compares `tie` (LT: first, GT: last).
    fn arg_select_region(&mut self, dtype: DType, better: &str, tie: &str) {
        let st = ty(dtype, &[]);
        let it = ty(DType::I64, &[]);
        let kind = compare_type(dtype);
        self.line(format_args!("    ^bb0(%ra: {st}, %ri: {it}, %rb: {st}, %rj: {it}):"));
        self.line(format_args!("      %b1 = stablehlo.compare {better}, %ra, %rb, {kind} : ({st}, {st}) -> tensor<i1>"));
        self.line(format_args!("      %b2 = stablehlo.compare EQ, %ra, %rb, {kind} : ({st}, {st}) -> tensor<i1>"));
        self.line(format_args!("      %b3 = stablehlo.compare {tie}, %ri, %rj, SIGNED : ({it}, {it}) -> tensor<i1>"));
        self.line(format_args!("      %b4 = stablehlo.and %b2, %b3 : tensor<i1>"));
        self.line(format_args!("      %b5 = stablehlo.or %b1, %b4 : tensor<i1>"));
        self.line(format_args!("      %b6 = stablehlo.select %b5, %ra, %rb : tensor<i1>, {st}"));
        self.line(format_args!("      %b7 = stablehlo.select %b5, %ri, %rj : tensor<i1>, {it}"));
        self.line(format_args!("      stablehlo.return %b6, %b7 : {st}, {it}"));
    }

    /// Index (i64) of the largest (`max`) or smallest element along `axis`; ties go to the first index, or the
    /// last with `last`. A two-operand `reduce` over (value, iota).
    pub fn arg_reduce(&mut self, x: &V, axis: usize, max: bool, last: bool) -> V {
        let idx = self.iota(axis, DType::I64, &x.shape.clone());
        let init_v = self.scalar(if max { lowest(x.dtype) } else { highest(x.dtype) }, x.dtype);
        let init_i = self.scalar(0.0, DType::I64);
        let shape: Vec<usize> = (0..x.rank()).filter(|&d| d != axis).map(|d| x.shape[d]).collect();
        let st = ty(x.dtype, &[]);
        let it = ty(DType::I64, &[]);
        let name = format!("%v{}", self.next);
        self.next += 1;
        let better = if max { "GT" } else { "LT" };
        let tie = if last { "GT" } else { "LT" };
        let loc = self.loc.clone();
        self.line(format_args!("    {name}:2 = \"stablehlo.reduce\"({}, {}, {}, {}) ({{", x.name, idx.name, init_v.name, init_i.name));
        self.arg_select_region(x.dtype, better, tie);
        self.line(format_args!(
            "    }}) {{dimensions = {}}} : ({}, {}, {st}, {it}) -> ({}, {}){}",
            i64_array(&[axis as i64]),
            x.ty(),
            idx.ty(),
            ty(x.dtype, &shape),
            ty(DType::I64, &shape),
            loc
        ));
        V { name: format!("{name}#1"), dtype: DType::I64, shape }
    }

    /// `x[..., indices, ...]` along `axis` (indices already in range) as a `gather`; the axis is replaced by the
    /// dims of `indices`.
    pub fn gather_axis(&mut self, x: &V, axis: usize, indices: &V) -> V {
        let ri = indices.rank();
        let rd = x.rank();
        let mut shape: Vec<usize> = x.shape[..axis].to_vec();
        shape.extend_from_slice(&indices.shape);
        shape.extend_from_slice(&x.shape[axis + 1..]);
        let offset_dims: Vec<usize> = (0..axis).chain(axis + ri..axis + ri + (rd - axis - 1)).collect();
        let slice_sizes: Vec<i64> = (0..rd).map(|i| if i == axis { 1 } else { x.shape[i] as i64 }).collect();
        let out = ty(x.dtype, &shape);
        self.emit(
            format!(
                "\"stablehlo.gather\"({}, {}) {{dimension_numbers = #stablehlo.gather<offset_dims = {}, collapsed_slice_dims = [{axis}], start_index_map = [{axis}], index_vector_dim = {ri}>, slice_sizes = {}, indices_are_sorted = false}} : ({}, {}) -> {out}",
                x.name,
                indices.name,
                list(&offset_dims),
                i64_array(&slice_sizes),
                x.ty(),
                indices.ty()
            ),
            x.dtype,
            shape,
        )
    }

    /// `scatter` of `updates` into `data` at `indices` (index vectors along `index_vector_dim`, addressing the
    /// `inserted` dims in order); `combine` merges the old element with the update (`None`: replace).
    #[allow(clippy::too_many_arguments)]
    pub fn scatter(
        &mut self,
        data: &V,
        indices: &V,
        updates: &V,
        update_window_dims: &[usize],
        inserted: &[usize],
        index_vector_dim: usize,
        combine: Option<&str>,
    ) -> V {
        let st = ty(data.dtype, &[]);
        let name = format!("%v{}", self.next);
        self.next += 1;
        let loc = self.loc.clone();
        self.line(format_args!("    {name} = \"stablehlo.scatter\"({}, {}, {}) ({{", data.name, indices.name, updates.name));
        self.line(format_args!("    ^bb0(%ra: {st}, %rb: {st}):"));
        match combine {
            None => self.line(format_args!("      stablehlo.return %rb : {st}")),
            Some(op) => {
                self.line(format_args!("      %rc = {op} %ra, %rb : {st}"));
                self.line(format_args!("      stablehlo.return %rc : {st}"));
            }
        }
        self.line(format_args!(
            "    }}) {{scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = {}, inserted_window_dims = {}, scatter_dims_to_operand_dims = {}, index_vector_dim = {index_vector_dim}>, indices_are_sorted = false, unique_indices = false}} : ({}, {}, {}) -> {}{loc}",
            list(update_window_dims),
            list(inserted),
            list(inserted),
            data.ty(),
            indices.ty(),
            updates.ty(),
            data.ty()
        ));
        V { name, dtype: data.dtype, shape: data.shape.clone() }
    }

    /// A `stablehlo.while` counting an i32 `i` from 0 to `n` (exclusive) over `carried` values, every value the
    /// body reads passed explicitly (no implicit captures): `body(cx, i, values)` emits one iteration and returns
    /// the next values (same types). Returns the final values. Splat constants are not shared across the region
    /// boundary (each region makes its own).
    pub fn counted_loop(&mut self, n: usize, carried: &[V], body: impl FnOnce(&mut Self, &V, &[V]) -> Vec<V>) -> Vec<V> {
        let i0 = self.scalar(0.0, DType::I32);
        let k = self.next;
        self.next += 1;
        let name = format!("%v{k}");
        let mut all = vec![i0];
        all.extend_from_slice(carried);
        let args: Vec<V> = all.iter().enumerate().map(|(j, v)| V { name: format!("%it{k}_{j}"), dtype: v.dtype, shape: v.shape.clone() }).collect();
        let inits: Vec<String> = args.iter().zip(&all).map(|(a, v)| format!("{} = {}", a.name, v.name)).collect();
        let types: Vec<String> = all.iter().map(V::ty).collect();
        let types = types.join(", ");
        let loc = self.loc.clone();
        self.line(format_args!("    {name}:{} = stablehlo.while({}) : {types}", all.len(), inits.join(", ")));
        self.line("    cond {");
        let outer = std::mem::take(&mut self.splats);
        let limit = self.scalar(n as f64, DType::I32);
        let more = self.compare("LT", &args[0], &limit);
        self.line(format_args!("      stablehlo.return {} : tensor<i1>", more.name));
        self.splats.clear();
        self.line("    } do {");
        let one = self.scalar(1.0, DType::I32);
        let next_i = self.add(&args[0], &one);
        let next = body(self, &args[0], &args[1..]);
        assert_eq!(next.len(), carried.len(), "counted_loop body returns one value per carried value");
        let names: Vec<&str> = std::iter::once(next_i.name.as_str()).chain(next.iter().map(|v| v.name.as_str())).collect();
        self.line(format_args!("      stablehlo.return {} : {types}", names.join(", ")));
        self.line(format_args!("    }}{loc}"));
        self.splats = outer;
        carried.iter().enumerate().map(|(j, v)| V { name: format!("{name}#{}", j + 1), dtype: v.dtype, shape: v.shape.clone() }).collect()
    }

    /// `dynamic_slice` of `a` at the (i32 scalar) `starts` with `sizes`.
    pub fn dynamic_slice(&mut self, a: &V, starts: &[V], sizes: &[usize]) -> V {
        let names: Vec<&str> = starts.iter().map(|s| s.name.as_str()).collect();
        let tys: Vec<String> = starts.iter().map(V::ty).collect();
        let out = ty(a.dtype, sizes);
        self.emit(
            format!("stablehlo.dynamic_slice {}, {}, sizes = {} : ({}, {}) -> {out}", a.name, names.join(", "), list(sizes), a.ty(), tys.join(", ")),
            a.dtype,
            sizes.to_vec(),
        )
    }

    /// `dynamic_update_slice`: `a` with `update` written at the (i32 scalar) `starts`.
    pub fn dynamic_update_slice(&mut self, a: &V, update: &V, starts: &[V]) -> V {
        let names: Vec<&str> = starts.iter().map(|s| s.name.as_str()).collect();
        let tys: Vec<String> = starts.iter().map(V::ty).collect();
        self.emit(
            format!(
                "stablehlo.dynamic_update_slice {}, {}, {} : ({}, {}, {}) -> {}",
                a.name,
                update.name,
                names.join(", "),
                a.ty(),
                update.ty(),
                tys.join(", "),
                a.ty()
            ),
            a.dtype,
            a.shape.clone(),
        )
    }

    /// `chlo.top_k` along the last dim: (values, i32 indices), largest first.
    pub fn top_k(&mut self, x: &V, k: usize, shape: &[usize]) -> (V, V) {
        let name = format!("%v{}", self.next);
        self.next += 1;
        let vt = ty(x.dtype, shape);
        let it = ty(DType::I32, shape);
        let loc = self.loc.clone();
        self.line(format_args!("    {name}:2 = chlo.top_k({}, k = {k}) : {} -> ({vt}, {it}){loc}", x.name, x.ty()));
        (
            V { name: format!("{name}#0"), dtype: x.dtype, shape: shape.to_vec() },
            V { name: format!("{name}#1"), dtype: DType::I32, shape: shape.to_vec() },
        )
    }
}

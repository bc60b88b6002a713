// project.wgsl: the two data passes of the demo's 2-D layout (subspace
// iteration for the top two principal components; see projection.go).
// The rows are the umbra index's own resident chunks (ondevice.Resident);
// each pass is dispatched once per chunk, with that chunk's params.
//
// Bindings, group 0:
//   0  rows     storage, read        array<vec4<f32>>  one chunk: rows × dim4 words, unit vectors, zero padded
//   1  basis    storage, read        array<vec4<f32>>  2 × dim4 words: axis 0 then axis 1
//   2  pos      storage, read_write  array<vec2<f32>>  one layout position per row of the whole set
//   3  partial  storage, read_write  array<vec4<f32>>  blocks × dim4 × 2 words of partial sums, all chunks
//   4  params   uniform              Params
//
// project:     one invocation per row of the chunk:
//              pos[base + i] = (x_i·b0, x_i·b1) − offset.
//              Dispatch (gridX, gridY) workgroups of 64 covering the chunk.
// weighted:    invocation (j, b) sums x_i[j] · w_i over the rows of the
//              chunk's block b (w_i = (1, 0) when mode is 0, pos[base + i]
//              otherwise) and writes partial[((block_base + b)·dim4 + j)·2
//              + axis]. Dispatch (⌈dim4/64⌉, the chunk's blocks) workgroups
//              of 64; the host adds the blocks of every chunk.

struct Params {
    rows: u32,       // rows in this chunk
    dim4: u32,
    mode: u32,       // weighted: 0 sums rows, 1 sums rows weighted by pos
    grid_x: u32,     // project: workgroups along x
    offset: vec2<f32>,
    block_rows: u32, // weighted: rows per block
    base: u32,       // the chunk's first row in the whole set
    block_base: u32, // weighted: the chunk's first block
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<storage, read> rows: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> basis: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> pos: array<vec2<f32>>;
@group(0) @binding(3) var<storage, read_write> partial: array<vec4<f32>>;
@group(0) @binding(4) var<uniform> params: Params;

@compute @workgroup_size(64)
fn project(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x + gid.y * params.grid_x * 64u;
    if (i >= params.rows) {
        return;
    }
    var a = vec4<f32>(0.0);
    var b = vec4<f32>(0.0);
    let base = i * params.dim4;
    for (var j = 0u; j < params.dim4; j++) {
        let x = rows[base + j];
        a += x * basis[j];
        b += x * basis[params.dim4 + j];
    }
    let one = vec4<f32>(1.0);
    pos[params.base + i] = vec2<f32>(dot(a, one), dot(b, one)) - params.offset;
}

@compute @workgroup_size(64)
fn weighted(@builtin(global_invocation_id) gid: vec3<u32>) {
    // Invocation (j, block) owns column word j of one block of rows:
    // neighbouring invocations read neighbouring words of a row.
    let j = gid.x;
    let block = gid.y;
    if (j >= params.dim4) {
        return;
    }
    let start = block * params.block_rows;
    let end = min(start + params.block_rows, params.rows);
    var a = vec4<f32>(0.0);
    var b = vec4<f32>(0.0);
    for (var r = start; r < end; r++) {
        let x = rows[r * params.dim4 + j];
        var w = vec2<f32>(1.0, 0.0);
        if (params.mode == 1u) {
            w = pos[params.base + r];
        }
        a += x * w.x;
        b += x * w.y;
    }
    let o = ((params.block_base + block) * params.dim4 + j) * 2u;
    partial[o] = a;
    partial[o + 1u] = b;
}

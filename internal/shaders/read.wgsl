// read.wgsl: the memory-bandwidth floor. It reads every vec4 of one chunk
// of the slab once, with the same coalesced pattern as scores.wgsl but no
// arithmetic beyond a running sum. Every lane's sum decides whether it
// writes (it compares with params.magic, which the host sets to a value a
// sum of squares never has), so no compiler can drop or sink the loads. Its
// time is what any exact scan of the resident slab must at least take on
// this device.
//
// Bindings (group 0):
//   0  rows  array<vec4<f32>>  storage, read        one chunk of the slab
//   1  sums  array<vec4<f32>>  storage, read_write  one slot per workgroup (never written in practice)
//   2  params ReadParams       uniform              vec4 words in the chunk, magic = -1

struct ReadParams {
    words: u32,
    magic: f32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<storage, read> rows: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> sums: array<vec4<f32>>;
@group(0) @binding(2) var<uniform> params: ReadParams;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    var acc = vec4<f32>(0.0);
    let stride = nwg.x * 256u;
    for (var i = wg.x * 256u + li; i < params.words; i += stride) {
        acc += rows[i];
    }
    if (dot(acc, acc) == params.magic) {
        sums[wg.x] = acc;
    }
}

fn main() {
    let spec = fak_cuda::synth::SynthSpec::parse(&std::env::args().nth(1).unwrap()).unwrap();
    let mut bytes = fak_cuda::synth::gguf_bytes(&spec).unwrap();
    let rel: f32 = std::env::args()
        .nth(3)
        .map(|s| s.parse().unwrap())
        .unwrap_or(0.0);
    if rel != 0.0 {
        // Perturb every element of blk.0.attn_q.bias by a relative `rel`.
        let f = fak_gguf::GgufFile::from_bytes(bytes.clone()).unwrap();
        let t = f.tensor("blk.0.attn_q.bias").unwrap().clone();
        let data = f.tensor_data(&t);
        let off = data.as_ptr() as usize - f.bytes().as_ptr() as usize;
        for i in 0..data.len() / 4 {
            let o = off + 4 * i;
            let v = f32::from_le_bytes(bytes[o..o + 4].try_into().unwrap());
            bytes[o..o + 4].copy_from_slice(&(v * (1.0 + rel)).to_le_bytes());
        }
    }
    let r = fak_cuda::check::cpu_reference(fak_gguf::GgufFile::from_bytes(bytes).unwrap()).unwrap();
    std::fs::write(
        std::env::args().nth(2).unwrap(),
        serde_json::to_string(&r).unwrap(),
    )
    .unwrap();
}

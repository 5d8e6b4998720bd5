// Real models the page offers to download (into this browser's store, OPFS) from their Hugging Face repos.
//
// Every fact carries the page it was read from. A fact nobody here could read from a public page is null
// ("unknown"), never guessed: with `sha256: null` the ingest records the hash it computes instead of checking it,
// with `size: null` the page cannot warn about storage before the download starts, with `revision: null` the file
// comes from the repo's main branch (so it may change; the store then notices a new ETag and starts over).
//
// What was verified (searches of public Hugging Face pages):
// - the repos exist and hold GGUF quantizations of these models (the `repo_source` pages);
// - Qwen3-30B-A3B Q8_0 is about 32.5 GB: bartowski's listing of the same quantization gives 32.48 GB
//   (`size_note_source`), and a Q8_0 GGUF of a Qwen3-30B-A3B finetune is 32.5 GB; that is a scale, not this
//   file's byte count, so `size` stays null.
// Not verified: the exact file names (they follow each repo's `<Model>-<QUANT>.gguf` naming), the revisions, the
// byte sizes and the sha256 hashes. Fill them in from the repo's file page ("Large File Pointer Details") to pin.

export const PINNED_MODELS = Object.freeze([
  Object.freeze({
    id: 'qwen3.6-35b-a3b-q8_0',
    label: 'Qwen3.6-35B-A3B Q8_0 (qwen35moe)',
    repo: 'unsloth/Qwen3.6-35B-A3B-GGUF',
    repo_source: 'https://huggingface.co/unsloth/Qwen3.6-35B-A3B-GGUF/discussions/10',
    file: 'Qwen3.6-35B-A3B-Q8_0.gguf', // unverified: the repo's naming convention
    revision: null,
    size: null,
    size_note: null,
    sha256: null,
    url: 'https://huggingface.co/unsloth/Qwen3.6-35B-A3B-GGUF/resolve/main/Qwen3.6-35B-A3B-Q8_0.gguf',
  }),
  Object.freeze({
    id: 'qwen3-30b-a3b-q8_0',
    label: 'Qwen3-30B-A3B Q8_0 (qwen3moe)',
    repo: 'unsloth/Qwen3-30B-A3B-GGUF',
    repo_source: 'https://huggingface.co/models?other=base_model:quantized:Qwen/Qwen3-30B-A3B',
    file: 'Qwen3-30B-A3B-Q8_0.gguf', // unverified: the repo's naming convention
    revision: null,
    size: null,
    size_note: 'about 32.5 GB',
    size_note_source: 'https://model.aibase.com/zh/models/details/1924737621108723712',
    sha256: null,
    url: 'https://huggingface.co/unsloth/Qwen3-30B-A3B-GGUF/resolve/main/Qwen3-30B-A3B-Q8_0.gguf',
  }),
]);

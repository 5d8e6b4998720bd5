// softplus(x) = log(1 + e^x), the DeltaNet's gate (the one-token and chunk recurrences).
fn softplus(x: f32) -> f32 {
  // above 20 it equals x in f32 (and e^x would overflow further up)
  if (x > 20.0) {
    return x;
  }
  return log(1.0 + exp(x));
}

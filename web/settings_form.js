// The Settings panel's fields: filled from the settings, and each change handed to the page (which saves it when
// the checks of settings.js accept it; a refused value is outlined).

const $ = (id) => document.getElementById(id);

export function showSettings(s, fallbackBudgetMiB) {
  $('set-budget').value = String(s.budgetMiB ?? fallbackBudgetMiB);
  $('set-ctx').value = String(s.nCtx);
  $('set-kv').value = s.kv;
  $('set-path').value = s.loadPath;
  $('set-cpu-workers').value = String(s.cpuWorkers);
  $('set-thinking').checked = s.thinking;
  $('set-max-tokens').value = String(s.maxTokens);
  $('set-temperature').value = String(s.temperature);
  $('set-top-k').value = String(s.topK);
  $('set-top-p').value = String(s.topP);
  $('set-min-p').value = String(s.minP);
  $('set-seed').value = s.seed === null ? '' : String(s.seed);
  $('model-url').value = s.url;
}

// onChange(name, value) -> true when the value was kept
export function bindSettings(onChange) {
  const num = (node) => (node.value.trim() === '' ? NaN : Number(node.value));
  const int = (node) => Math.round(num(node));
  const fields = [
    ['set-budget', 'budgetMiB', num],
    ['set-ctx', 'nCtx', int],
    ['set-kv', 'kv', (n) => n.value],
    ['set-path', 'loadPath', (n) => n.value],
    ['set-cpu-workers', 'cpuWorkers', int],
    ['set-thinking', 'thinking', (n) => n.checked],
    ['set-max-tokens', 'maxTokens', int],
    ['set-temperature', 'temperature', num],
    ['set-top-k', 'topK', int],
    ['set-top-p', 'topP', num],
    ['set-min-p', 'minP', num],
    ['set-seed', 'seed', (n) => (n.value.trim() === '' ? null : int(n))],
  ];
  for (const [id, name, read] of fields) {
    $(id).addEventListener('change', () => {
      $(id).classList.toggle('invalid', !onChange(name, read($(id))));
    });
  }
}

// The model store is shared by every tab of this origin. Two things keep the tabs honest about it:
// - a Web Lock per model in use ("diskformer-model-in-use:<folder>", shared): a tab holds it while the model is
//   loaded; removal takes it exclusively and only if free, so a model another tab is using is refused, not deleted;
// - a BroadcastChannel ("diskformer-store"): a tab that stored or removed a model tells the others, who refresh
//   their lists.

const CHANNEL = 'diskformer-store';
const lockName = (folder) => `diskformer-model-in-use:${folder}`;

export class StoreSync {
  #channel = null;
  #release = null; // resolves the held lock's promise
  #released = Promise.resolve(); // settles once the held lock is given back
  held = null; // the folder this tab holds

  constructor(onChange) {
    if ('BroadcastChannel' in globalThis) {
      this.#channel = new BroadcastChannel(CHANNEL);
      this.#channel.onmessage = (event) => onChange(event.data);
    }
  }

  announce(change) {
    this.#channel?.postMessage(change);
  }

  // Hold the in-use lock of `folder` (released first: one loaded model per tab).
  hold(folder) {
    this.release();
    if (!navigator.locks || !folder) return;
    this.held = folder;
    const held = new Promise((resolve) => { this.#release = resolve; });
    this.#released = navigator.locks.request(lockName(folder), { mode: 'shared' }, () => held).catch(() => {});
  }

  // Give the lock back; the promise settles once it is free for others (a removal right after must see it free).
  release() {
    this.#release?.();
    this.#release = null;
    this.held = null;
    return this.#released;
  }

  // Run `action` while no tab uses `folder`; {ran: false} at once when one does.
  async whileUnused(folder, action) {
    if (!navigator.locks) return { ran: true, value: await action() };
    return navigator.locks.request(lockName(folder), { mode: 'exclusive', ifAvailable: true }, async (lock) => {
      if (!lock) return { ran: false };
      return { ran: true, value: await action() };
    });
  }
}

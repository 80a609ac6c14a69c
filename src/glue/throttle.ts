// Leading+trailing throttle: the first call runs at once, calls during the wait collapse into one run at
// the end of it. Live event streams call this hundreds of times a second; views update at most 1/interval.
import type * as vscode from 'vscode';

export class Throttle implements vscode.Disposable {
  private timer: ReturnType<typeof setTimeout> | undefined;
  private last = 0;
  private pending = false;

  constructor(
    private readonly intervalMs: number,
    private readonly run: () => void,
  ) {}

  trigger(): void {
    const wait = this.last + this.intervalMs - Date.now();
    if (wait <= 0 && !this.timer) {
      this.fire();
      return;
    }
    this.pending = true;
    this.timer ??= setTimeout(() => {
      this.timer = undefined;
      if (this.pending) this.fire();
    }, Math.max(0, wait));
  }

  private fire(): void {
    this.pending = false;
    this.last = Date.now();
    this.run();
  }

  dispose(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.pending = false;
  }
}

/**
 * A background loop that sleeps until it is woken (new work, a freed slot) or its next work falls
 * due. `tick` does one round and returns how long it may sleep, in ms; it is told whether the
 * round was asked for by `notify` (true) or came at its time, or first (false).
 */
export class WorkLoop {
  private running = false;
  private wakeUp: (() => void) | null = null;
  private woken = false;
  private finished: Promise<void> = Promise.resolve();

  constructor(
    private readonly tick: (woken: boolean) => Promise<number>,
    private readonly onError: (error: unknown) => void,
  ) {}

  start(): void {
    if (this.running) return;
    this.running = true;
    this.finished = this.run();
  }

  /** Runs a round soon, whatever the loop was waiting for. */
  notify(): void {
    this.woken = true;
    this.wakeUp?.();
  }

  async stop(): Promise<void> {
    this.running = false;
    this.notify();
    await this.finished;
  }

  get isRunning(): boolean {
    return this.running;
  }

  private async run(): Promise<void> {
    let woken = false;
    while (this.running) {
      let sleepMs = 1000;
      this.woken = false;
      try {
        sleepMs = await this.tick(woken);
      } catch (error) {
        // A failing round (say, the database is busy) must not end the loop: try again shortly.
        this.onError(error);
      }
      woken = true;
      if (!this.running || this.woken) continue;
      woken = await new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => resolve(false), Math.max(0, sleepMs));
        this.wakeUp = () => {
          clearTimeout(timer);
          resolve(true);
        };
      });
      this.wakeUp = null;
    }
  }
}

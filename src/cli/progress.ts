/**
 * A progress line on stderr for long CLI work: redrawn in place on a terminal, else printed when a
 * step ends or every tenth of it (logs stay short).
 */
export class ProgressLine {
  private readonly interactive: boolean;
  private lastTenth = -1;

  constructor(private readonly stream: NodeJS.WriteStream = process.stderr) {
    this.interactive = stream.isTTY === true;
  }

  update(label: string, done: number, total: number): void {
    const fraction = total === 0 ? 1 : Math.min(1, done / total);
    const text = `${label} ${bar(fraction)} ${done}/${total} (${Math.floor(fraction * 100)}%)`;
    if (this.interactive) {
      this.stream.write(`\r${text}\u001b[K`);
      return;
    }
    const tenth = Math.floor(fraction * 10);
    if (tenth !== this.lastTenth) {
      this.lastTenth = tenth;
      this.stream.write(`${text}\n`);
    }
  }

  /** Ends the current step's line. */
  done(): void {
    if (this.interactive) this.stream.write('\n');
    this.lastTenth = -1;
  }
}

export function bar(fraction: number, width = 24): string {
  const filled = Math.round(fraction * width);
  return `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}]`;
}

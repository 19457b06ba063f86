import { Writable } from 'node:stream';
import type { Logger } from 'pino';
import { type LogLevel, loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/logger.js';

/** The service's real logger (its serializers and redaction), writing JSON lines into memory. */
export function capturedLogger(level: LogLevel = 'debug'): {
  lines: string[];
  logger: Logger;
  /** The lines parsed. */
  records(): Array<Record<string, unknown>>;
} {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk, _encoding, done) {
      lines.push(...String(chunk).split('\n').filter(Boolean));
      done();
    },
  });
  return {
    lines,
    logger: createLogger(loadConfig({ ASSAY_LOG_LEVEL: level }), sink),
    records: () => lines.map((line) => JSON.parse(line) as Record<string, unknown>),
  };
}

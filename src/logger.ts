import { type DestinationStream, type Logger, type LoggerOptions, pino } from 'pino';
import type { Config } from './config.js';
import { errorForLog, redactText, requestForLog } from './http/log-redaction.js';

/** The service's logger: at the configured level, with credentials kept out of every line. */
export function createLogger(config: Config, destination?: DestinationStream): Logger {
  const options: LoggerOptions = {
    level: config.logLevel,
    // Credentials never reach the logs, whatever a future serializer includes.
    redact: {
      paths: ['req.headers.authorization', 'headers.authorization', '*.secret', 'secret'],
      censor: '[redacted]',
    },
    // Token ids are credentials inside URLs: requests, errors and messages lose them.
    serializers: { req: requestForLog, err: errorForLog },
    hooks: {
      logMethod(args, method) {
        method.apply(
          this,
          args.map((arg) => (typeof arg === 'string' ? redactText(arg) : arg)) as typeof args,
        );
      },
    },
  };
  return destination === undefined ? pino(options) : pino(options, destination);
}

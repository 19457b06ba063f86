import type { Logger } from 'pino';
import {
  type Aggregator,
  Counter,
  collectDefaultMetrics,
  Gauge,
  Histogram,
  Registry,
} from 'prom-client';

/** The longest a value read at scrape time may take; past it, it is left out of that scrape. */
export const SCRAPE_PART_TIMEOUT_MS = 2_000;

let processRegistry: Registry | null = null;

/**
 * The process's own metrics (memory, CPU, event-loop lag, garbage collection; prom-client's
 * defaults), set up once per process however many services it runs (tests run many).
 */
function processMetrics(): Registry {
  if (processRegistry === null) {
    processRegistry = new Registry();
    collectDefaultMetrics({ register: processRegistry });
  }
  return processRegistry;
}

interface MetricOptions<L extends string> {
  name: string;
  help: string;
  labelNames?: readonly L[];
  /**
   * How `serve --processes` combines the processes' values (prom-client's cluster aggregator):
   * `sum` by default; `max` for a value every process reads from the shared store, or a setting.
   */
  aggregator?: Aggregator;
}

/**
 * A value read when metrics are scraped (a store query, clamd's VERSION), shared by the gauges
 * that show it: read once per scrape, within SCRAPE_PART_TIMEOUT_MS, or left out of the scrape.
 */
export class ScrapedPart<T> {
  private inFlight: Promise<T | null> | null = null;

  constructor(
    readonly name: string,
    private readonly read: () => Promise<T>,
    private readonly failed: (part: string, error: unknown) => void,
    private readonly timeoutMs = SCRAPE_PART_TIMEOUT_MS,
  ) {}

  /** The value, or null when it failed or took too long (logged and counted). */
  value(): Promise<T | null> {
    // A scrape asks every gauge at once: they share the reading in flight.
    this.inFlight ??= this.readOnce().finally(() => {
      this.inFlight = null;
    });
    return this.inFlight;
  }

  private async readOnce(): Promise<T | null> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`no answer within ${this.timeoutMs} ms`)),
        this.timeoutMs,
      );
    });
    try {
      return await Promise.race([this.read(), timeout]);
    } catch (error) {
      this.failed(this.name, error);
      return null;
    } finally {
      clearTimeout(timer);
    }
  }
}

/**
 * One service's metrics beside its process's, in prom-client's registry. Domain-neutral: it makes
 * metrics and reads them out; what they mean is the caller's (service-metrics.ts).
 */
export class MetricsRegistry {
  private readonly registry = new Registry();
  /** Everything a scrape of this service shows: the process's metrics and its own. */
  readonly registries: readonly Registry[] = [processMetrics(), this.registry];
  private readonly scrapeErrors: Counter<'part'>;
  private readonly parts: ScrapedPart<unknown>[] = [];

  constructor(private readonly logger: Logger) {
    const parts = this.parts;
    this.scrapeErrors = new Counter({
      name: 'assay_scrape_errors_total',
      help: 'Values left out of a scrape because reading them failed or took too long, by part.',
      labelNames: ['part'],
      registers: [this.registry],
      // Read once this scrape's parts are read: their failures count in the same scrape.
      async collect() {
        await Promise.all(parts.map((part) => part.value()));
      },
    });
  }

  counter<L extends string>(options: MetricOptions<L>): Counter<L> {
    return new Counter({
      ...options,
      labelNames: options.labelNames ?? [],
      registers: [this.registry],
    });
  }

  histogram<L extends string>(options: MetricOptions<L> & { buckets: number[] }): Histogram<L> {
    return new Histogram({
      ...options,
      labelNames: options.labelNames ?? [],
      registers: [this.registry],
    });
  }

  /** A gauge set as things happen (or from values this process holds, at scrape time). */
  gauge<L extends string>(
    options: MetricOptions<L> & { collect?: (gauge: Gauge<L>) => void | Promise<void> },
  ): Gauge<L> {
    const { collect, ...rest } = options;
    return new Gauge<L>({
      ...rest,
      labelNames: rest.labelNames ?? [],
      registers: [this.registry],
      ...(collect === undefined
        ? {}
        : {
            collect(this: Gauge<L>) {
              return collect(this);
            },
          }),
    });
  }

  /** A value to read at scrape time, within the timeout; a failure is logged and counted. */
  part<T>(name: string, read: () => Promise<T>, timeoutMs?: number): ScrapedPart<T> {
    const part = new ScrapedPart(
      name,
      read,
      (failed, error) => {
        this.scrapeErrors.inc({ part: failed });
        this.logger.warn(
          { err: error, part: failed },
          'a metric could not be read; left out of the scrape',
        );
      },
      timeoutMs,
    );
    this.parts.push(part);
    this.scrapeErrors.inc({ part: name }, 0);
    return part;
  }

  /**
   * A gauge set at each scrape from a part's value (read once for all the gauges that show it).
   * It is emptied first: a scrape whose part failed shows none of its series, never stale ones, and
   * series whose labels changed (a new signature version) leave with the old value.
   */
  scrapedGauge<T, L extends string>(
    options: MetricOptions<L>,
    part: ScrapedPart<T>,
    set: (gauge: Gauge<L>, value: T) => void,
  ): Gauge<L> {
    const labelNames = options.labelNames ?? [];
    return new Gauge<L>({
      ...options,
      labelNames,
      registers: [this.registry],
      async collect(this: Gauge<L>) {
        const value = await part.value();
        this.reset();
        if (value !== null) set(this, value);
        // reset() leaves a gauge without labels at 0: a value nobody read is no value.
        else if (labelNames.length === 0) this.remove();
      },
    });
  }

  /** The Prometheus text format of everything registered. */
  text(): Promise<string> {
    return Registry.merge([...this.registries]).metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}

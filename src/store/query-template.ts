import type { Compilable, CompiledQuery, Kysely, QueryResult } from 'kysely';
import { directStatementsOf } from './direct-statements.js';
import type { Database } from './schema.js';

/** Stands in for the i-th parameter while a template is built; never a value a caller passes. */
const sentinel = (index: number): string => `\u0000assay-parameter-${index}\u0000`;

/** Where each of the compiled query's parameters comes from: a caller's argument or a constant. */
type Slot = { argument: number } | { constant: unknown };

interface Compiled {
  query: CompiledQuery;
  slots: Slot[];
}

/**
 * A query built and compiled once per dialect, then run with new parameters: for the statements
 * every item runs. Kysely builds and compiles each query anew, and on the hot path that cost more
 * CPU than SQLite took to run it. `build` is called once per dialect with placeholders for its
 * arguments: it must pass them through untouched (no JSON.stringify, no arithmetic on them) and
 * build the same shape whatever they are.
 */
export class QueryTemplate<Args extends unknown[], Row = unknown> {
  /** By dialect (adapter class): the SQL text differs, e.g. `?` against `$1`. */
  private readonly compiled = new Map<unknown, Compiled>();

  constructor(
    private readonly arity: number,
    private readonly build: (db: Kysely<Database>, ...args: Args) => Compilable<Row>,
  ) {}

  async execute(db: Kysely<Database>, ...args: Args): Promise<QueryResult<Row>> {
    const { query, slots } = this.compiledFor(db);
    const parameters = slots.map((slot) =>
      'argument' in slot ? args[slot.argument] : slot.constant,
    );
    const direct = directStatementsOf(db, query.sql);
    if (direct !== null) return direct.run<Row>(query.sql, parameters);
    return db.executeQuery<Row>({ ...query, parameters } as CompiledQuery<Row>);
  }

  private compiledFor(db: Kysely<Database>): Compiled {
    const dialect = db.getExecutor().adapter.constructor;
    let compiled = this.compiled.get(dialect);
    if (compiled === undefined) {
      const placeholders = Array.from({ length: this.arity }, (_, i) => sentinel(i)) as Args;
      const query = this.build(db, ...placeholders).compile();
      const used = new Set<number>();
      const slots = query.parameters.map((value): Slot => {
        const argument = placeholders.indexOf(value);
        if (argument < 0) return { constant: value };
        used.add(argument);
        return { argument };
      });
      if (used.size !== this.arity) {
        throw new Error(`a query template used ${used.size} of its ${this.arity} arguments`);
      }
      compiled = { query, slots };
      this.compiled.set(dialect, compiled);
    }
    return compiled;
  }
}

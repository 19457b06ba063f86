import { sql } from 'kysely';

/**
 * Starts the text of a statement the store runs for every item, so that on PostgreSQL it is sent
 * as a named prepared statement (`dialects/postgres.ts`): parsed once per connection and planned
 * once its generic plan is as good as a custom one. Elsewhere it is only a comment.
 */
export const PREPARED_MARK = '/* prepared */ ';

/** PREPARED_MARK as the first part of a `sql` template. */
export const prepared = sql.raw(PREPARED_MARK);

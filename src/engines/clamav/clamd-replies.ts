import type { ClamdVerdict, ClamdVersion } from './clamd-client.js';
import { errorFromReply } from './clamd-connection.js';

/** clamd's verdict, or undefined for any other reply (an error). */
export function scanVerdict(reply: string): ClamdVerdict | undefined {
  // `stream: ` for INSTREAM, `fd[<n>]: ` for FILDES.
  const name = /^(?:stream|fd\[\d{1,10}\]): /.exec(reply);
  if (name === null) return undefined;
  const rest = reply.slice(name[0].length);
  if (rest === 'OK') return { signature: null };
  const found = /^(.+) FOUND$/.exec(rest);
  return found?.[1] === undefined ? undefined : { signature: found[1] };
}

export function parseScanReply(reply: string): ClamdVerdict {
  const verdict = scanVerdict(reply);
  if (verdict === undefined) throw errorFromReply(reply);
  return verdict;
}

export function parseVersion(reply: string): ClamdVersion {
  // `ClamAV 1.4.6/27000/Sun Nov 22 09:00:00 2026`, or just `ClamAV 1.4.6` without official databases.
  if (!reply.startsWith('ClamAV ')) throw errorFromReply(reply);
  const [engine = reply, database, ...date] = reply.split('/');
  const databaseVersion =
    database !== undefined && /^\d+$/.test(database) ? Number(database) : null;
  const databaseDate = date.length > 0 ? new Date(date.join('/')) : null;
  return {
    engine,
    databaseVersion,
    databaseDate:
      databaseDate !== null && !Number.isNaN(databaseDate.getTime()) ? databaseDate : null,
  };
}

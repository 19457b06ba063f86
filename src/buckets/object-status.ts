import type { ScanStatus } from './verdict-tags.js';

// An object's result says why it has no verdict in words that start with its status, so the
// status written back follows from the result alone (the result is what clients read too).

const DENIED = 'ACCESS_DENIED: ';
const UNSUPPORTED = 'UNSUPPORTED: ';

/** The error of an object Assay may not read. */
export function deniedMessage(detail: string): string {
  return `${DENIED}the object may not be read (${detail})`;
}

/** The error of an object Assay cannot scan: too large, or encrypted with a key it may not use. */
export function unsupportedMessage(detail: string): string {
  return `${UNSUPPORTED}${detail}`;
}

/** The status of an object's result: clean, a threat, or why there is no verdict. Never clean without one. */
export function statusOfResult(
  findings: readonly string[] | null,
  error: string | null,
): ScanStatus {
  if (findings !== null && error === null)
    return findings.length === 0 ? 'NO_THREATS_FOUND' : 'THREATS_FOUND';
  if (findings !== null && findings.length > 0) return 'THREATS_FOUND';
  if (error?.startsWith(DENIED)) return 'ACCESS_DENIED';
  if (error?.startsWith(UNSUPPORTED)) return 'UNSUPPORTED';
  return 'FAILED';
}

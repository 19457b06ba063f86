import { availableParallelism } from 'node:os';
import { CLAMD_MAX_SCAN_TIME_MS, VERDICT_MARGIN_MS } from './clamd-client.js';
import type { ClamdReloadMode } from './managed-clamd.js';

const MiB = 1024 * 1024;
// libclamav cannot scan single files of 2 GiB or more and clamps MaxFileSize to this.
const CLAMD_FILE_SIZE_CAP = 2 ** 31 - 3;

/** The limits written to clamd.conf, in bytes. */
export interface ClamdLimits {
  streamMaxLength: number;
  maxFileSize: number;
  maxScanSize: number;
}

/** Above Assay's upload limit, so an accepted upload never trips clamd's stream limit. */
export function clamdLimits(maxFileSize: number): ClamdLimits {
  const stream = maxFileSize + MiB;
  // Containers count with their unpacked contents; 4x keeps clamd's default ratio (100M/400M).
  const maxScanSize = Math.min(4 * stream, CLAMD_FILE_SIZE_CAP - MiB);
  return {
    streamMaxLength: stream,
    // Above MaxScanSize, not at the upload limit: clamd's zip reader cuts an entry that unpacks
    // past MaxFileSize at that size and scans the cut part as if it were all, with no alert
    // (ClamAV 1.4 unzip.c: EICAR after 200 MiB of zeros came back clean). Cut at more than
    // MaxScanSize, the entry trips that limit instead, which AlertExceedsMax reports.
    maxFileSize: Math.min(maxScanSize + MiB, CLAMD_FILE_SIZE_CAP),
    maxScanSize,
  };
}

/** What the managed clamd's configuration is written from. */
export interface ClamdConfigSettings {
  socketPath: string;
  tmpDir: string;
  dbDir: string;
  limits: ClamdLimits;
  selfCheckSeconds: number;
  reload: ClamdReloadMode;
  /** clamd's ScanImageFuzzyHash (ASSAY_CLAMD_IMAGE_FUZZY_HASH); default on. */
  imageFuzzyHash?: boolean;
}

/** The clamd.conf of Assay's managed clamd, written at each of its starts. */
export function clamdConfig(settings: ClamdConfigSettings): string {
  const threads = Math.min(16, Math.max(4, availableParallelism() * 2));
  const readTimeoutSeconds = (CLAMD_MAX_SCAN_TIME_MS + VERDICT_MARGIN_MS) / 1000;
  return `# Written by Assay at every start of its managed clamd: edits here are lost.
Foreground yes
LocalSocket ${settings.socketPath}
LocalSocketMode 660
FixStaleSocket yes
TemporaryDirectory ${settings.tmpDir}
DatabaseDirectory ${settings.dbDir}
# Output goes to stdout/stderr, which Assay reads into its own log.
LogSyslog no
LogTime no
LogClean no
MaxThreads ${threads}
# Every open connection (streaming, queued or scanning) counts; beyond it clamd stops accepting.
MaxQueue 256
CommandReadTimeout 30
# Above the client's idle timeout, so a slow upload is cut by Assay with a clear error first; and
# above MaxScanTime, because in a session (IDSESSION) it also runs while clamd scans: a session
# silent for this long is ended with COMMAND READ TIMED OUT and its scan's verdict is lost.
ReadTimeout ${readTimeoutSeconds}
# A scan that takes longer is reported as Heuristics.Limits.Exceeded.MaxScanTime (see below);
# Assay's client waits for the verdict a little longer than this, so clamd's answer comes first.
MaxScanTime ${CLAMD_MAX_SCAN_TIME_MS}
# Assay links new signature files in and asks for a reload itself; this catches the rest.
SelfCheck ${settings.selfCheckSeconds}
# yes: scanning goes on with the old set during a reload, which holds both sets in memory;
# no: clamd answers nothing until the new set is loaded (ASSAY_CLAMD_RELOAD).
ConcurrentDatabaseReload ${settings.reload === 'blocking' ? 'no' : 'yes'}
StreamMaxLength ${settings.limits.streamMaxLength}
MaxFileSize ${settings.limits.maxFileSize}
MaxScanSize ${settings.limits.maxScanSize}
# Content over a limit is reported as Heuristics.Limits.Exceeded.*, never passed as clean.
AlertExceedsMax yes
# Content no engine can read (encrypted archives and documents) is reported as
# Heuristics.Encrypted.*, never passed as clean.
AlertEncrypted yes
# A fuzzy hash of every image, for fuzzy_img signatures (ASSAY_CLAMD_IMAGE_FUZZY_HASH): about
# 17 ms of clamd's CPU per 1 MP JPEG; without it those signatures cannot match.
ScanImageFuzzyHash ${settings.imageFuzzyHash === false ? 'no' : 'yes'}
`;
}

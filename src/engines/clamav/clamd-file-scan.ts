import type { ClamdVerdict, InstreamScan } from './clamd-client.js';
import {
  abortedError,
  type ClamdConnection,
  ClamdUnavailableError,
  type Command,
  type ScanControl,
} from './clamd-connection.js';
import { parseScanReply, scanVerdict } from './clamd-replies.js';
import type { ClamdSessionPool } from './clamd-session-pool.js';
import { type ClamdSession, ClamdSessionError } from './clamd-sessions.js';
import { type DescriptorPassing, type MemoryFileBudget, ScanFile } from './descriptor-passing.js';

/** What clamd said of an item handed over as a file (see FileScans.scanFile). */
type FileOutcome = { verdict: ClamdVerdict } | { refused: string | null };

/**
 * ClamdClient's scans by descriptor ("clamd by descriptor" in ARCHITECTURE.md): each item is
 * written to a ScanFile as it arrives and handed to clamd (FILDES) on a pooled session once it
 * ends.
 */
export class FileScans {
  /** clamd failed a file where a stream of it did not (told once: the client streams after). */
  private refused = false;

  constructor(
    private readonly passing: DescriptorPassing,
    /** Where items that outgrow memory files are written, unnamed. */
    private readonly dir: string,
    private readonly sessions: ClamdSessionPool,
    /** Items up to this size are held and put in a memory file at the end. */
    private readonly holdMax: number,
    private readonly memoryFiles: MemoryFileBudget,
    private readonly open: (command: Command) => ClamdConnection,
    private readonly onScanned: () => void,
    private readonly onRefused: (reply: string) => void,
  ) {}

  /**
   * The item is written to a ScanFile as it arrives and clamd scans that file (FILDES) once it
   * ends. Where the disk refuses the file, the item streams on (INSTREAM) from its start; where
   * clamd does not answer FILDES with a verdict, it is sent once as a stream from the file.
   */
  scan(): InstreamScan {
    const control: ScanControl = { aborted: false, cancel: undefined };
    const file = new ScanFile(this.passing, this.dir, this.holdMax, this.memoryFiles);
    let connection: ClamdConnection | undefined;
    let finishing = false;
    return {
      write: async (chunk) => {
        if (control.aborted) throw abortedError();
        if (connection !== undefined) return connection.write(chunk);
        try {
          file.write(chunk);
        } catch {
          // No room on the disk: the item streams to clamd from its start, as without files.
          connection = this.open('INSTREAM');
          for (const piece of file.pieces()) await connection.write(piece);
          file.close();
        }
      },
      finish: async () => {
        finishing = true;
        try {
          if (control.aborted) throw abortedError();
          if (connection !== undefined) {
            const blocked = connection.end();
            if (blocked !== undefined) throw blocked;
            return parseScanReply(await connection.readReply());
          }
          let outcome: FileOutcome;
          try {
            outcome = await this.scanFile(file.descriptor(), control);
          } catch (error) {
            if (error instanceof ClamdUnavailableError) throw error;
            // No file to hand over (descriptors or memory ran out): the item goes as a stream.
            outcome = { refused: null };
          }
          if ('verdict' in outcome) {
            this.onScanned();
            return outcome.verdict;
          }
          const streamed = await this.streamPieces(file.pieces(), control);
          if (outcome.refused !== null && !this.refused) {
            // clamd failed the file where a stream of the same content did not: streams from now on.
            this.refused = true;
            this.onRefused(outcome.refused);
          }
          return streamed;
        } finally {
          connection?.destroy();
          file.close();
        }
      },
      abort: () => {
        control.aborted = true;
        connection?.destroy();
        control.cancel?.();
        // While finish() runs, it closes the file itself (a descriptor closed under a command
        // about to go out could be reused by another file by then).
        if (!finishing) file.close();
      },
    };
  }

  /**
   * FILDES of `fd` on a session (one outside the pool when it is full). `refused` where clamd gave
   * no verdict for the file though it may for a stream: its reply, or null for a session that
   * failed before any reply (the caller sends the item once more as a stream).
   */
  private async scanFile(fd: number, control: ScanControl): Promise<FileOutcome> {
    const pool = this.sessions;
    const pooled = pool.acquire();
    const session: ClamdSession = pooled ?? pool.standalone();
    control.cancel = () => session.cancel();
    try {
      const reply = await session.commandWithDescriptor(fd, this.passing);
      const verdict = scanVerdict(reply);
      if (pooled === undefined) session.close();
      else pool.release(session, verdict !== undefined);
      return verdict === undefined ? { refused: reply } : { verdict };
    } catch (error) {
      if (pooled === undefined) session.close();
      if (!(error instanceof ClamdSessionError) || !error.retryable || control.aborted) {
        throw error;
      }
      if (error.unsupported) pool.suspend();
      return { refused: null };
    } finally {
      control.cancel = undefined;
    }
  }

  /** INSTREAM of `pieces` on a connection of its own. */
  private async streamPieces(
    pieces: Iterable<Buffer>,
    control: ScanControl,
  ): Promise<ClamdVerdict> {
    const connection = this.open('INSTREAM');
    control.cancel = () => connection.destroy();
    try {
      for (const piece of pieces) {
        if (control.aborted) throw abortedError();
        await connection.write(piece);
      }
      const blocked = connection.end();
      if (blocked !== undefined) throw blocked;
      return parseScanReply(await connection.readReply());
    } finally {
      control.cancel = undefined;
      connection.destroy();
    }
  }
}

/**
 * libmagic compiled to WASM (the wasmagic package's build and database), in two tiers
 * (magic-tiers.ts): the full database, and one without the tests a head rules out cheaply.
 * Each tier is its own WASM instance, since libmagic keeps one loaded database per instance.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import libmagicWrapper from 'wasmagic/dist/libmagic-wrapper.js';
import { stripEmbeddedFile } from './libmagic-binary.js';
import {
  looksBinaryToLibmagic,
  MAGIC_NO_CHECK_ENCODING,
  MAGIC_NO_CHECK_TEXT,
} from './magic-encoding.js';
import { type MagicTiers, splitMagic } from './magic-tiers.js';

// A CommonJS module whose exports are the factory, and `default` the same factory (its typings
// declare only `default`).
const createLibmagicModule = libmagicWrapper.default;
/** libmagic's MAGIC_MIME_TYPE: the answer is a media type. */
const MAGIC_MIME_TYPE = 16;
const DATABASE = 'magic.mgc';

interface Instance {
  detect(head: Uint8Array): string;
}

type LibmagicModule = Awaited<ReturnType<typeof createLibmagicModule>>;

interface Binary {
  /** wasmagic's binary without its embedded database; null: the binary as it is. */
  binary: Uint8Array | null;
  /** The database it embeds (null: read from the instance's file system). */
  database: Uint8Array | null;
}

/**
 * wasmagic's binary without its embedded database, and the database (libmagic-binary.ts), read
 * anew for each use: held, the database would stay resident (10.8 MB) in the thread.
 */
export function libmagicBinary(): Binary {
  try {
    const path = createRequire(import.meta.url).resolve('wasmagic/dist/libmagic-wrapper.wasm');
    const { binary, file } = stripEmbeddedFile(readFileSync(path), `/magic/${DATABASE}`);
    return { binary, database: file };
  } catch {
    return { binary: null, database: null };
  }
}

/**
 * Loads `database` (compiled) into a new instance of `binary` (wasmagic's when null) with
 * libmagic's `flags` (beside MAGIC_MIME_TYPE); the bundled database when it is null.
 */
async function load(
  binary: Uint8Array | null,
  database: Uint8Array | null,
  flags = 0,
): Promise<{ instance: Instance; module: LibmagicModule }> {
  const module = await createLibmagicModule(binary === null ? {} : { wasmBinary: binary });
  module.printOverride = () => {};
  module.FS.chdir('/magic');
  if (database !== null) {
    module.FS.unlink(`/magic/${DATABASE}`);
    // Owned, not copied: libmagic reads it into its own memory, then the file is unlinked.
    module.FS.createDataFile('/magic', DATABASE, database, true, false, true);
  }
  const error = module.ccall(
    'magic_wrapper_load',
    'string',
    ['number', 'string'],
    [MAGIC_MIME_TYPE | flags, DATABASE],
  ) as string;
  if (error !== '') throw new Error(`libmagic could not load its database: ${error}`);
  const detect = module.cwrap('magic_wrapper_detect', 'string', ['number', 'number']) as (
    pointer: number,
    length: number,
  ) => string;
  const instance = {
    detect(head: Uint8Array): string {
      const pointer = module._malloc(head.length);
      try {
        module.HEAPU8.set(head, pointer);
        return detect(pointer, head.length);
      } finally {
        module._free(pointer);
      }
    },
  };
  return { instance, module };
}

/**
 * splitMagic, or null if the database surprises it: the full database then answers everything,
 * as slowly as before and with the same answers (the split is an optimisation, never a need).
 */
function splitOrNull(database: Uint8Array): MagicTiers | null {
  try {
    return splitMagic(database);
  } catch {
    return null;
  }
}

/**
 * The reduced tier alone: answers a head that it answers exactly as the full database would
 * (proved binary, and no removed test can match it), and null for any other head. Small enough
 * (a 1.5 MB database) to load beside the full database's worker, in the thread that asks.
 */
export class ReducedTier {
  private constructor(
    private readonly instance: Instance,
    private readonly tiers: Omit<MagicTiers, 'reduced'>,
  ) {}

  /** Null when the database cannot be split (the full database then answers everything). */
  static async create(
    binary: Uint8Array | null = null,
    database: Uint8Array | null = null,
  ): Promise<ReducedTier | null> {
    const source = binary === null && database === null ? libmagicBinary() : { binary, database };
    const tiers = splitOrNull(source.database ?? (await Libmagic.bundledDatabase()));
    if (tiers === null) return null;
    // The reduced tier only sees heads proved binary (magic-encoding.ts): libmagic's own encoding
    // checks would only say so again, at more cost than its tests.
    const { instance, module } = await load(
      source.binary,
      tiers.reduced,
      MAGIC_NO_CHECK_ENCODING | MAGIC_NO_CHECK_TEXT,
    );
    module.FS.unlink(`/magic/${DATABASE}`);
    // The reduced database's bytes are libmagic's now: held here they would stay resident.
    const { mayMatchRemoved, removed, kept } = tiers;
    return new ReducedTier(instance, { mayMatchRemoved, removed, kept });
  }

  /** Whether `head` takes the full database: it may be text to libmagic, or a removed test may match it. */
  takesFullDatabase(head: Uint8Array): boolean {
    return !looksBinaryToLibmagic(head) || this.tiers.mayMatchRemoved(head);
  }

  /** The tiers' sizes in top-level tests. */
  get split(): { removed: number; kept: number } {
    return { removed: this.tiers.removed, kept: this.tiers.kept };
  }

  /** libmagic's media type for `head`, or null when only the full database may answer it. */
  detect(head: Uint8Array): string | null {
    return this.takesFullDatabase(head) ? null : this.instance.detect(head);
  }
}

export class Libmagic {
  private constructor(
    private readonly full: Instance,
    private readonly reduced: ReducedTier | null,
  ) {}

  /** `tiered: false` loads the full database only (the reference the tests compare against). */
  static async create({ tiered = true }: { tiered?: boolean } = {}): Promise<Libmagic> {
    const { binary, database } = libmagicBinary();
    const { instance: full, module } = await load(binary, database);
    // The loaded copy is all libmagic needs; the file would keep 10 MB of the instance's heap.
    const source = tiered ? (database ?? module.FS.readFile(`/magic/${DATABASE}`)) : null;
    module.FS.unlink(`/magic/${DATABASE}`);
    const reduced = source === null ? null : await ReducedTier.create(binary, source);
    return new Libmagic(full, reduced);
  }

  /** The compiled database wasmagic bundles (what `create` loads). */
  static async bundledDatabase(): Promise<Uint8Array> {
    const { database } = libmagicBinary();
    if (database !== null) return database;
    const module = await createLibmagicModule({});
    return module.FS.readFile(`/magic/${DATABASE}`);
  }

  /** Whether `head` takes the full database (always, with one tier). */
  takesFullDatabase(head: Uint8Array): boolean {
    return this.reduced === null || this.reduced.takesFullDatabase(head);
  }

  /** The tiers' sizes in top-level tests (null: one tier). */
  get split(): { removed: number; kept: number } | null {
    return this.reduced?.split ?? null;
  }

  /** libmagic's media type for `head` (with parameters, as libmagic writes it). */
  detect(head: Uint8Array): string {
    return this.reduced?.detect(head) ?? this.full.detect(head);
  }
}

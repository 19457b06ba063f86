// Glob patterns for `assay scan --exclude`, matched in time linear in the path's length: the
// pattern becomes a small automaton whose set of live states is advanced one character at a time
// (no backtracking, so a pattern like `*a*a*a*b` cannot blow up on a long name; a regular
// expression built from it could). Paths are `/`-separated.
//
// `*` any run of characters but `/`; `?` one character but `/`; `[abc]`, `[a-z]`, `[!a-z]` (or
// `[^a-z]`) one character of (or not of) a set, never `/`; `**` any run of characters, `/`
// included; `**/` any run of whole folders, none included (`a/**/b` matches `a/b`); `\x` the
// character x itself.

/** Longer patterns are refused: the work per path character grows with the pattern. */
export const MAX_GLOB_LENGTH = 1024;

type CharTest = (char: string) => boolean;

interface State {
  /** Consuming a character that passes `test` leads to `to`. */
  moves: Array<{ test: CharTest; to: number }>;
  /** States reached without consuming anything. */
  free: number[];
}

const anyChar: CharTest = () => true;
const notSlash: CharTest = (char) => char !== '/';
const slash: CharTest = (char) => char === '/';

export function compileGlob(pattern: string): (path: string) => boolean {
  if (pattern.length > MAX_GLOB_LENGTH) {
    throw new Error(`a pattern may have at most ${MAX_GLOB_LENGTH} characters`);
  }
  const states = buildStates([...pattern]);
  const accept = states.length - 1;
  const closures = states.map((_, index) => closureOf(states, index));
  return (path) => {
    let live = new Set(closures[0]);
    for (const char of path) {
      const next = new Set<number>();
      for (const index of live) {
        for (const move of states[index]?.moves ?? []) {
          if (move.test(char)) for (const reached of closures[move.to] ?? []) next.add(reached);
        }
      }
      if (next.size === 0) return false;
      live = next;
    }
    return live.has(accept);
  };
}

/** One state per pattern element, plus states for `**` + `/`, and the accepting state last. */
function buildStates(chars: string[]): State[] {
  const states: State[] = [];
  const add = (): State => {
    const state: State = { moves: [], free: [] };
    states.push(state);
    return state;
  };
  let i = 0;
  while (i < chars.length) {
    const char = chars[i] as string;
    const here = states.length;
    const state = add();
    if (char === '*' && chars[i + 1] === '*') {
      let end = i + 2;
      while (chars[end] === '*') end += 1;
      if (chars[end] === '/') {
        // Zero folders (skip ahead), or any run ending in a `/` (through a second state, so the
        // skip is only possible before anything is consumed).
        const inFolders = add();
        state.free.push(here + 2, here + 1);
        inFolders.moves.push({ test: anyChar, to: here + 1 }, { test: slash, to: here + 2 });
        i = end + 1;
      } else {
        state.free.push(here + 1);
        state.moves.push({ test: anyChar, to: here });
        i = end;
      }
    } else if (char === '*') {
      state.free.push(here + 1);
      state.moves.push({ test: notSlash, to: here });
      i += 1;
    } else if (char === '?') {
      state.moves.push({ test: notSlash, to: here + 1 });
      i += 1;
    } else if (char === '[') {
      const parsed = parseClass(chars, i);
      state.moves.push({ test: parsed?.test ?? ((c) => c === '['), to: here + 1 });
      i = parsed?.end ?? i + 1;
    } else {
      const escaped = char === '\\' && i + 1 < chars.length;
      const literal = escaped ? (chars[i + 1] as string) : char;
      state.moves.push({ test: (c) => c === literal, to: here + 1 });
      i += escaped ? 2 : 1;
    }
  }
  add();
  return states;
}

/** `[...]` from `start`: its test and the index after `]`, or null when unterminated. */
function parseClass(chars: string[], start: number): { test: CharTest; end: number } | null {
  let i = start + 1;
  const negated = chars[i] === '!' || chars[i] === '^';
  if (negated) i += 1;
  const ranges: Array<[string, string]> = [];
  let first = true;
  while (i < chars.length && (chars[i] !== ']' || first)) {
    first = false;
    let low = chars[i] as string;
    if (low === '\\' && i + 1 < chars.length) {
      i += 1;
      low = chars[i] as string;
    }
    if (chars[i + 1] === '-' && i + 2 < chars.length && chars[i + 2] !== ']') {
      ranges.push([low, chars[i + 2] as string]);
      i += 3;
    } else {
      ranges.push([low, low]);
      i += 1;
    }
  }
  if (i >= chars.length) return null;
  const inSet = (c: string) => ranges.some(([low, high]) => c >= low && c <= high);
  return { test: (c) => c !== '/' && inSet(c) !== negated, end: i + 1 };
}

/** The states reachable from `start` without consuming a character, `start` included. */
function closureOf(states: State[], start: number): number[] {
  const seen = new Set([start]);
  const stack = [start];
  for (let index = stack.pop(); index !== undefined; index = stack.pop()) {
    for (const next of states[index]?.free ?? []) {
      if (!seen.has(next)) {
        seen.add(next);
        stack.push(next);
      }
    }
  }
  return [...seen];
}

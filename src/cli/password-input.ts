const MAX_LINE = 4096;

/** The first line of standard input (`--password-stdin`), without its line ending. */
export async function passwordFromStdin(): Promise<string> {
  let text = '';
  for await (const chunk of process.stdin) {
    text += String(chunk);
    const end = text.search(/\r?\n/);
    if (end !== -1) return text.slice(0, end);
    if (text.length > MAX_LINE) throw new Error('the password line is too long');
  }
  return text;
}

/** Asks for a password on the terminal without echoing it, twice; throws if they differ. */
export async function passwordFromTerminal(): Promise<string> {
  const first = await askHidden('Password: ');
  const second = await askHidden('Password again: ');
  if (first !== second) throw new Error('the passwords differ');
  return first;
}

function askHidden(prompt: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const input = process.stdin;
    process.stderr.write(prompt);
    input.setRawMode(true);
    input.resume();
    let typed = '';
    const done = (error: Error | null) => {
      input.off('data', onData);
      input.setRawMode(false);
      input.pause();
      process.stderr.write('\n');
      if (error === null) resolve(typed);
      else reject(error);
    };
    const onData = (chunk: Buffer) => {
      for (const char of chunk.toString('utf8')) {
        if (char === '\r' || char === '\n') return done(null);
        if (char === '\u0003') return done(new Error('cancelled'));
        if (char === '\u007f' || char === '\b') typed = typed.slice(0, -1);
        else if (typed.length < MAX_LINE) typed += char;
      }
    };
    input.on('data', onData);
  });
}

/** The password of `--password-stdin`, or asked on a terminal; null when neither can give one. */
export async function readNewPassword(fromStdin: boolean): Promise<string | null> {
  if (fromStdin) return passwordFromStdin();
  if (process.stdin.isTTY === true) return passwordFromTerminal();
  return null;
}

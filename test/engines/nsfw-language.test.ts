import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { foldCompatibilityForms } from '../../src/engines/nsfw-language/chunks.js';
import { LanguageDetector } from '../../src/engines/nsfw-language/detect.js';
import { NsfwLanguageEngine } from '../../src/engines/nsfw-language/engine.js';
import { LANGUAGE_TEST_MARKER } from '../../src/engines/test-content.js';
import { docxWithText, pdfWithText } from '../helpers/documents.js';
import {
  CORPUS_SEED,
  evasionCorpus,
  LANGUAGES,
  type Language,
  randomDataTexts,
  SCUNTHORPE_SENTENCES,
  shippedProse,
} from '../helpers/language-corpus.js';
import { DOCX, EN, signal, useLanguageEngine } from '../helpers/language-engine.js';

/** Each format's way of carrying a few lines of text, as Assay's type detector names it. */
const FORMATS: Record<string, { type: string; make: (lines: string[]) => Buffer }> = {
  'plain text': { type: 'text/plain', make: (lines) => Buffer.from(lines.join('\n')) },
  HTML: {
    type: 'text/html',
    make: (lines) =>
      Buffer.from(
        `<!DOCTYPE html><html><head><title>Notes</title><style>p { color: red }</style></head>` +
          `<body>${lines.map((line) => `<p>${line.replace(/&/g, '&amp;')}</p>`).join('\n')}</body></html>`,
      ),
  },
  JSON: {
    type: 'application/json',
    make: (lines) => Buffer.from(JSON.stringify({ comments: lines.map((text) => ({ text })) })),
  },
  PDF: { type: 'application/pdf', make: pdfWithText },
  DOCX: { type: DOCX, make: docxWithText },
};

const EVASIONS = [
  'what the f*ck',
  'fuuuuck this',
  'that is sh1t',
  'ｆｕｃｋ ｙｏｕ',
  'f u c k off',
  'oh sh!t',
  'you b1tch',
];

/** Innocent words that naive filters flag (the Scunthorpe problem). */
const INNOCENT_ENGLISH = [
  'We landed in Scunthorpe; the cockpit crew ordered shiitake soup.',
  'The pussycat sat by the cocktail bar in Essex, reading about an assassin.',
  'She graduated magna cum laude from a classic school near Penistone.',
  'The analysis of the therapist was grape-based: a Dickensian bass.',
];

describe('nsfw-language engine', () => {
  const shared = useLanguageEngine();
  const { examine } = shared;

  test('compatibility forms fold as NFKC of each character where it keeps the length', () => {
    // The definition the table stands for, one NFKC per character.
    const reference = (text: string) =>
      text.replace(/[\u0250-\uffff]/g, (char) => {
        const folded = char.normalize('NFKC');
        return folded.length === char.length ? folded : char;
      });
    const every = Array.from({ length: 0x10000 }, (_, code) => String.fromCharCode(code)).join('');
    assert.equal(foldCompatibilityForms(every), reference(every));
    const mixed =
      'Ｆｕｌｌ-width ｆｕｃｋ, ﬁne ligatures, ①②, ㍿, 𝐦𝐚𝐭𝐡, é vs e\u0301, 日本語, \ud800 alone';
    assert.equal(foldCompatibilityForms(mixed), reference(mixed));
    assert.equal(foldCompatibilityForms('ｆｕｃｋ'), 'fuck');
    const plain = 'plain Latin text stays the very same string';
    assert.equal(foldCompatibilityForms(plain), plain);
  });

  test('wants text, JSON, HTML, PDF and DOCX, and nothing else', () => {
    for (const type of [
      'text/plain',
      'text/html',
      'text/csv',
      'application/json',
      'application/pdf',
      DOCX,
    ]) {
      assert.equal(shared.engine.wants(type), true, type);
    }
    for (const type of ['image/jpeg', 'application/zip', 'application/octet-stream']) {
      assert.equal(shared.engine.wants(type), false, type);
    }
  });

  for (const [format, { type, make }] of Object.entries(FORMATS)) {
    test(`English obscenities with evasions are flagged in ${format}`, async () => {
      for (const evasion of EVASIONS) {
        const report = await examine(make(['A quiet line first.', evasion]), type);
        assert.deepEqual(report.findings, [EN], `${format}: ${evasion}`);
        assert.match(report.trace.join('\n'), /en at \d+-\d+ \((?:fuck|shit|bitch)\)/, evasion);
      }
    });

    test(`innocent English words are not flagged in ${format}`, async () => {
      const report = await examine(make(INNOCENT_ENGLISH), type);
      assert.deepEqual(report.findings, [], report.trace.join('\n'));
    });
  }

  test('HTML markup and entities do not hide a word, and scripts are not text', async () => {
    const hidden = await examine(Buffer.from('<p>f<b>u</b>ck and &#115;hit</p>'), 'text/html');
    assert.deepEqual(hidden.findings, [EN]);
    const script = await examine(
      Buffer.from('<html><body><p>Hello</p><script>const fuck = 1;</script></body></html>'),
      'text/html',
    );
    assert.deepEqual(script.findings, []);
  });

  test('JSON is read by its strings, keys and escapes included, however deeply nested', async () => {
    const escaped = await examine(
      Buffer.from('{"note": "\\u0066uck", "sh1t": 1}'),
      'application/json',
    );
    assert.equal(escaped.findings.length, 1);
    assert.match(escaped.trace.join('\n'), /en at 5-9 \(fuck\), 10-14 \(shit\)/);
    const deep = `${'['.repeat(100_000)}"clean words"${']'.repeat(100_000)}`;
    assert.deepEqual((await examine(Buffer.from(deep), 'application/json')).findings, []);
  });

  test('JSON of millions of empty arrays costs no more than its text; text between strings is read whole', async () => {
    // 15 MB of `[],`: parsed whole, this tree needs hundreds of MB; a 64 MB worker reads it.
    const frugal = await NsfwLanguageEngine.create({ poolSize: 1, workerHeapMb: 64 });
    try {
      const arrays = Buffer.from(`[${'[],'.repeat(5_000_000)}"shit"]`);
      const report = await frugal.examine(arrays, 'application/json', signal());
      assert.deepEqual(report.findings, [EN]);
    } finally {
      await frugal.close();
    }
    // Not quite JSON: a word outside the strings is still read.
    const loose = await examine(Buffer.from('{"a": "clean"} fuck'), 'application/json');
    assert.deepEqual(loose.findings, [EN]);
  });

  test('the offsets go into the trace, not the findings', async () => {
    const report = await examine(Buffer.from('Well, shit happens.'), 'text/plain');
    assert.deepEqual(report.findings, [EN]);
    assert.ok(report.trace.includes('nsfw-language: en at 6-10 (shit)'), report.trace.join('\n'));
  });

  test('German, French and Spanish obscenities are flagged with their language', async () => {
    const samples: Array<[string, string]> = [
      ['de', 'Halt die Klappe, du blödes Arschloch!'],
      ['de', 'So eine Scheiße, alles ist verfickt.'],
      ['fr', 'Quelle merde, ce connard est parti.'],
      ['fr', "Ferme-la, espèce d'enfoiré."],
      ['es', 'Eres un cabrón y un hijo de puta.'],
      ['es', '¡Qué mierda de día!'],
    ];
    for (const [language, text] of samples) {
      for (const [format, { type, make }] of Object.entries(FORMATS)) {
        const report = await examine(make([text]), type);
        assert.deepEqual(
          report.findings,
          [`content.${language}.language.nsfw.0`],
          `${format}: ${text}`,
        );
      }
    }
  });

  test('ordinary German, French, Spanish and Italian prose is not flagged', async () => {
    const prose = [
      'Der Fehler lag beim Metzger: die Eier und Knochen waren für die Hunde. Das ist lustig.',
      "Pour le dîner, je mange une pomme et de la pâte. Et toi ? S'il vous plaît, à 5 heures.",
      'El perro come un hueso en el vehículo. La corrida termina; el café está caliente.',
      'La regina mangia il pesce con le fave; il finocchio e i piselli sono nel cesso.',
    ];
    const report = await examine(Buffer.from(prose.join('\n')), 'text/plain');
    assert.deepEqual(report.findings, [], report.trace.join('\n'));
  });

  test('the language test sample of COMPAT.md is flagged as English, in any format', async () => {
    for (const [format, { type, make }] of Object.entries(FORMATS)) {
      const report = await examine(make([LANGUAGE_TEST_MARKER]), type);
      assert.deepEqual(report.findings, [EN], format);
    }
  });

  test('a corrupt PDF or DOCX is an error, never a pass', async () => {
    await assert.rejects(
      examine(Buffer.from('%PDF-1.7\n1 0 obj broken'), 'application/pdf'),
      /PDF/,
    );
    const docx = docxWithText(['fine']);
    await assert.rejects(examine(docx.subarray(0, docx.length - 30), DOCX), /DOCX/);
  });

  test('content or text beyond the caps is an error, never a pass', async () => {
    const small = await NsfwLanguageEngine.create({
      poolSize: 1,
      maxBytes: 1000,
      maxTextChars: 100,
    });
    try {
      await assert.rejects(
        small.examine(Buffer.alloc(1001, 'a'), 'text/plain', signal()),
        /at most 1000 bytes/,
      );
      await assert.rejects(
        small.examine(Buffer.alloc(200, 'a'), 'text/plain', signal()),
        /longer than the 100 characters/,
      );
      const report = await small.examine(Buffer.from('plain words'), 'text/plain', signal());
      assert.deepEqual(report.findings, []);
    } finally {
      await small.close();
    }
  });

  test('content exhausting a worker heap is an error, and the engine goes on working', async () => {
    const frugal = await NsfwLanguageEngine.create({ poolSize: 1, workerHeapMb: 32 });
    try {
      // 17.5 M characters, beyond Latin-1 so stored two bytes each, with a full-width question
      // mark that folds (so the folded text is a copy): 35 MB of text twice cannot fit in a
      // 32 MB heap, whatever the Node version (one-byte text of 16 MB fits on Node 24).
      const big = Buffer.from('Ein ganz normaler Satz aus Köln – oder？ '.repeat(440_000));
      assert.ok(big.length < 20 * 1024 * 1024, 'within the engine’s size limit');
      await assert.rejects(frugal.examine(big, 'text/plain', signal()), /memory limit/);
      const report = await frugal.examine(Buffer.from('So eine Scheiße.'), 'text/plain', signal());
      assert.deepEqual(report.findings, ['content.de.language.nsfw.0']);
    } finally {
      await frugal.close();
    }
  });

  test('a stopped examination is an error, and the engine goes on working', async () => {
    const text = Buffer.from('All good here. '.repeat(400_000));
    await assert.rejects(shared.engine.examine(text, 'text/plain', AbortSignal.abort()), /stopped/);
    const controller = new AbortController();
    const running = shared.engine.examine(text, 'text/plain', controller.signal);
    controller.abort(new Error('the item was cancelled'));
    await assert.rejects(running, /stopped: the item was cancelled/);
    const report = await examine(Buffer.from('what the fuck'), 'text/plain');
    assert.deepEqual(report.findings, [EN]);
  });
});

describe('nsfw-language detection: innocent text and disguised obscenities', () => {
  const detector = new LanguageDetector();
  /** Findings per language on each benign corpus, for the summary. */
  const benign: Array<{ corpus: string; perLanguage: Map<string, number> }> = [];

  /** How many texts have findings of each language, and which texts have any. */
  function examineAll(texts: string[]): { perLanguage: Map<string, number>; flagged: string[] } {
    const perLanguage = new Map<string, number>(LANGUAGES.map((language) => [language, 0]));
    const flagged: string[] = [];
    for (const text of texts) {
      const languages = new Set(detector.detect(text).matches.map((match) => match.language));
      if (languages.size > 0) flagged.push(text);
      for (const language of languages) {
        perLanguage.set(language, (perLanguage.get(language) ?? 0) + 1);
      }
    }
    return { perLanguage, flagged };
  }

  function explain(texts: string[]): string {
    return texts
      .flatMap((text) =>
        detector
          .detect(text)
          .matches.map(
            (match) =>
              `${match.language} ${match.term}: …${text.slice(match.start - 30, match.end + 30)}…`,
          ),
      )
      .slice(0, 10)
      .join('\n');
  }

  test('identifiers from the issue are not words: a55c5, d41b00b7e, 8abeed1', () => {
    for (const text of [
      'a55c5',
      'd41b00b7e',
      '8abeed1',
      'commit 8abeed1 fixed d41b00b7e (a55c5)',
    ]) {
      assert.deepEqual(detector.detect(text).matches, [], text);
    }
  });

  test('a short hash of hexadecimal letters only is data among hashes of its length, a word elsewhere', () => {
    // One 7-character hash in a thousand has no digit; read alone, "caccaaa" stretches into "cacca".
    const hashes = '6de6877 ac90adb c050bb1 caccaaa c0cf8e5 2f5d7d6';
    assert.deepEqual(detector.detect(hashes).matches, [], hashes);
    assert.deepEqual(detector.detect('caccaaa c0cf8e5').matches, []);
    assert.deepEqual(detector.detect('c050bb1 caccaaa').matches, []);
    for (const text of ['che caccaaa', 'caccaaa 2024', 'c050bb12 caccaaa', 'caccaaa\n\nc0cf8e5x']) {
      assert.deepEqual(
        detector.detect(text).matches.map((match) => match.term),
        ['cacca'],
        text,
      );
    }
  });

  test('no findings on 10,000 random 1 KB texts of hex, base64 and UUIDs', (t) => {
    const started = performance.now();
    const texts = randomDataTexts(10_000);
    const { perLanguage, flagged } = examineAll(texts);
    benign.push({ corpus: '10,000 random hex/base64/UUID texts', perLanguage });
    t.diagnostic(
      `10,000 texts (seed ${CORPUS_SEED}) generated and examined in ${(performance.now() - started).toFixed(0)} ms`,
    );
    assert.equal(flagged.length, 0, explain(flagged));
  });

  test('no findings on the prose the project ships: licenses, copyright files, READMEs in five languages', (t) => {
    const files = shippedProse();
    const characters = files.reduce((sum, file) => sum + file.text.length, 0);
    // An emptied or moved corpus must fail, not pass over nothing.
    assert.ok(files.length >= 15 && characters >= 150_000, `${files.length} files, ${characters}`);
    const { perLanguage, flagged } = examineAll(files.map((file) => file.text));
    benign.push({ corpus: `${files.length} prose files`, perLanguage });
    t.diagnostic(`${files.length} files, ${(characters / 1e3).toFixed(0)} K characters`);
    const paths = files.filter((file) => flagged.includes(file.text)).map((file) => file.path);
    assert.deepEqual(paths, [], explain(flagged));
  });

  test('no findings on the Scunthorpe words in sentences', () => {
    const { perLanguage, flagged } = examineAll(SCUNTHORPE_SENTENCES);
    benign.push({ corpus: `${SCUNTHORPE_SENTENCES.length} Scunthorpe sentences`, perLanguage });
    assert.deepEqual(flagged, [], explain(flagged));
  });

  test('at least 95% of disguised obscenities are flagged in each language', (t) => {
    const corpus = evasionCorpus();
    const missedBy: Partial<Record<Language, string[]>> = {};
    for (const language of LANGUAGES) {
      const sentences = corpus[language];
      const missed = sentences.filter(
        (sentence) =>
          !detector.detect(sentence).matches.some((match) => match.language === language),
      );
      missedBy[language] = missed;
      const rate = (100 * (sentences.length - missed.length)) / sentences.length;
      const falsePositives = benign
        .map(({ corpus, perLanguage }) => `${perLanguage.get(language) ?? 0} on ${corpus}`)
        .join(', ');
      t.diagnostic(
        `${language}: ${rate.toFixed(1)}% of ${sentences.length} disguised obscenities flagged; ` +
          `false positives: ${falsePositives || 'benign corpora not run'}`,
      );
      assert.ok(rate >= 95, `${language}: ${rate.toFixed(1)}%, missed: ${missed.join(' | ')}`);
    }
  });
});

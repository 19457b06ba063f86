import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { LanguageDetector } from '../../src/engines/nsfw-language/detect.js';
import { LANGUAGE_TEST_MARKER } from '../../src/engines/test-content.js';
import { DOCUMENT_XML, docxWithDocumentXml, paragraphXml } from '../helpers/documents.js';
import { DOCX, EN, useLanguageEngine } from '../helpers/language-engine.js';
import { deflateRepeated } from '../helpers/zip.js';

// @run-alone: times the matcher (100 KB under 1 s, linear); a bomb refused in 10 s

describe('nsfw-language engine', () => {
  const { examine } = useLanguageEngine();

  test('a DOCX that unpacks past 128 MiB is an error at once, never unpacked whole', async () => {
    // 1.5 GiB of paragraphs from 1.5 MB: mammoth unpacked it whole, outside the worker's heap
    // limit (4.8 GB of RSS, 20 s), before failing on its length.
    const paragraphs = Buffer.from(paragraphXml('lol lol lol').repeat(1500));
    const bomb = deflateRepeated(
      paragraphs,
      Math.ceil((1536 * 1024 * 1024) / paragraphs.length),
      Buffer.from(DOCUMENT_XML.head),
      Buffer.from(`${paragraphXml(LANGUAGE_TEST_MARKER)}${DOCUMENT_XML.tail}`),
    );
    // Its headers may tell the truth or not: what it unpacks to is counted.
    for (const document of [bomb, { ...bomb, size: 1000 }]) {
      const started = performance.now();
      await assert.rejects(
        examine(docxWithDocumentXml(document), DOCX),
        /unpack to more than the 134217728 bytes examined/,
      );
      assert.ok(performance.now() - started < 10_000, 'refused while unpacking, not after');
    }
    // Within the limit it is read to its end.
    const under = deflateRepeated(
      paragraphs,
      Math.floor((1024 * 1024) / paragraphs.length),
      Buffer.from(DOCUMENT_XML.head),
      Buffer.from(`${paragraphXml(LANGUAGE_TEST_MARKER)}${DOCUMENT_XML.tail}`),
    );
    const report = await examine(docxWithDocumentXml(under), DOCX);
    assert.deepEqual(report.findings, [EN]);
  });
});

describe('nsfw-language detection: innocent text and disguised obscenities', () => {
  const detector = new LanguageDetector();

  test('matching takes time linear in the text, however near-miss the text', (t) => {
    const nearMisses = [
      'f*** ', // wildcards that read as nothing
      'fu*k ', // wildcards that read as a word, in every token
      `a${'!'.repeat(50)}b `, // symbols inside a token
      'f u c ', // letters spelt apart, never a word
      `f${'u'.repeat(150)}c `, // a stretched near-word
      'hijo de ', // a phrase begun, never ended
      'mierda ', // a phrase's first words, over and over
      'sh1 ', // look-alikes
      'motherfuc ', // a stem almost reached
      'c****o ', // many wildcards
      'x', // one long token
      'Ni9G479tmegk eVBeg+rMAST0/NIg ', // data chunks
      'caccaaa ', // hexadecimal letters only: each looks at its neighbours
      'caccaaa 6de6877 ', // ...beside hashes
    ];
    const timeOf = (text: string) => {
      let best = Number.POSITIVE_INFINITY;
      for (let round = 0; round < 5; round++) {
        const started = performance.now();
        detector.detect(text);
        best = Math.min(best, performance.now() - started);
      }
      return best;
    };
    for (const unit of nearMisses) {
      const text = (size: number) => unit.repeat(Math.ceil(size / unit.length)).slice(0, size);
      for (let round = 0; round < 3; round++) detector.detect(text(100_000)); // warm up
      const [small, medium, large] = [1_000, 10_000, 100_000].map((size) => timeOf(text(size)));
      t.diagnostic(
        `${JSON.stringify(unit.slice(0, 20))}: 1 KB ${small?.toFixed(2)} ms, 10 KB ${medium?.toFixed(2)} ms, 100 KB ${large?.toFixed(2)} ms`,
      );
      assert.ok((large as number) < 1000, `${unit}: 100 KB in ${large} ms`);
      // Linear: ten times the text, about ten times the time (quadratic would be a hundred).
      assert.ok(
        (large as number) < 30 * Math.max(medium as number, 1),
        `${unit}: 10 KB in ${medium} ms, 100 KB in ${large} ms`,
      );
    }
  });
});

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { NsfwLanguageEngine } from '../../src/engines/nsfw-language/engine.js';

const FR = 'content.fr.language.nsfw.0';

/** Author and copyright lines holding a surname that is also a listed slur: all clean. */
const NAMES = [
  'Copyright: 2003-2005, Jérôme Nègre <jerome.negre@example.org>',
  ' *     Jérôme Nègre              - some fixes',
  ' * @author Jérôme Nègre',
  '(c) 2003 Jérôme Nègre',
  'Copyright 2004 Jean-Pierre Nègre',
  'Nègre, Jérôme. Les fils RSS en Java. Paris, 2004.',
  'Index des photographes : Nègre, Charles ; Le Secq, Henri.',
  'Auteur principal : J. Nègre <jerome.negre@example.org>',
  'Nègre, J. et al., Calotypes du Midi, 1852.',
  'Copyright © 2019 Jérôme NÈGRE et les contributeurs.',
  'Les calotypes de Charles Nègre furent pris à Chartres.',
  'Giovanni Verga pubblicò I Malavoglia nel 1881.',
  'Verga, Giovanni, Novelle rusticane, Torino, 1883.',
  'Dr. G. Verga, revisione delle bozze',
  // A name wrapped at the end of a line, as copyright files' paragraphs are.
  'Comment: the extension functions are by Jean-Pierre\n Nègre, the tests by Nègre,\n J. Dupont.',
  'Philip Dick and Murray Cumming, with notes by Dick Fowles.',
  // Adolf Fick and his law are innocent phrases, not the surname rule (names.ts says why).
  "Adolf Fick stated Fick's law of diffusion in 1855; das zweite Fick'sche Gesetz folgt.",
];

/**
 * The slur written as an insult, each with its language's finding: in small letters, shouted,
 * called out, after the words of an insult, after a listed word, or in no name's place.
 */
const INSULTS: Array<[string, string[]]> = [
  ['sale nègre', [FR]],
  ['Sale nègre, va-t’en.', [FR]],
  ['Sale Nègre', [FR]], // Title Case: "Sale" is no given name
  ['SALE NÈGRE', [FR]], // shouted: a given name is in title case
  ['NÈGRE', [FR]],
  ['Nègre!', [FR]],
  ['Nègre !', [FR]],
  ['Jérôme Nègre !', [FR]], // called out: a name followed by "!" is read as the word
  ['Espèce de Nègre', [FR]],
  ['Hé Nègre, viens ici.', [FR]],
  ['jérôme nègre', [FR]], // a name is written with capitals
  ['A Nègre', [FR]], // one letter is an initial only with its full stop
  ['Nègre Jérôme', [FR]], // a surname put first takes a comma
  ['Jérôme\n\nNègre', [FR]], // a paragraph apart: one line break at most
  ['Sale\n   Nègre', [FR]],
  ['Nègre, sale', [FR]],
  ['Nègre, Hé', [FR]],
  ['Jérôme Nègres', [FR]], // the plural is no surname
  ['Putain Nègre', [FR]], // a listed word is never a given name ...
  ['Fucking Nègre', ['content.en.language.nsfw.0', FR]], // ... of any language
  ['Pinche Verga', ['content.es.language.nsfw.0']],
  ['vete a la verga', ['content.es.language.nsfw.0']],
  ['Stupid Dick', ['content.en.language.nsfw.0']], // English names follow the same rule
  ['Hans Fick', ['content.de.language.nsfw.0']], // no surname rule for German nouns
  ['Schneller Fick gesucht', ['content.de.language.nsfw.0']],
  ['Fick dich', ['content.de.language.nsfw.0']],
];

describe('nsfw-language: a surname after a given name, and the same word as a slur', () => {
  let engine: NsfwLanguageEngine;
  const examine = (text: string) =>
    engine.examine(Buffer.from(text), 'text/plain', AbortSignal.timeout(60_000));

  before(async () => {
    engine = await NsfwLanguageEngine.create({ poolSize: 1 });
  });
  after(() => engine.close());

  test('a surname in an author or copyright line is a name: Nègre, Verga', async () => {
    for (const line of NAMES) {
      const report = await examine(line);
      assert.deepEqual(report.findings, [], `${line}\n${report.trace.join('\n')}`);
    }
    // All together, as a copyright file has them.
    assert.deepEqual((await examine(NAMES.join('\n'))).findings, []);
  });

  test('the slur as an insult is still flagged', async () => {
    for (const [text, findings] of INSULTS) {
      const report = await examine(text);
      assert.deepEqual(report.findings, findings, `${text}\n${report.trace.join('\n')}`);
    }
  });

  test('a name and an insult in one text: the insult is flagged, at its offset', async () => {
    const report = await examine('Copyright 2004 Jérôme Nègre. Tais-toi, sale nègre.');
    assert.deepEqual(report.findings, [FR]);
    assert.ok(report.trace.includes('nsfw-language: fr at 44-49 (nègre)'), report.trace.join('\n'));
  });
});

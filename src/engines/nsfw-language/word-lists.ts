import { profaneWords } from '@2toad/profanity';
import type { WordSource } from './lexicon.js';

/**
 * The languages other than English that Assay checks with @2toad/profanity's word lists. Those
 * lists are largely machine translations of its English list: besides real obscenities they hold
 * everyday words ("fehler", "pour", "perro", "pesce") and English leftovers. The lists of the
 * languages below were read through and their innocent words are left out here; the package's
 * other languages (pt, ru, ar, hi, ja, ko, zh) have not been, and would flag ordinary text.
 */
export const OTHER_LANGUAGES = ['de', 'es', 'fr', 'it'] as const;

/** Words of the package's lists that are ordinary, mild or clinical in that language. */
// biome-ignore format: word lists read better packed than one word a line
const INNOCENT: Record<(typeof OTHER_LANGUAGES)[number], string[]> = {
  de: [
    'esel', 'eier', 'bälle', 'glocke', 'hündchen', 'metzger', 'verdammt', 'blasen', 'knochen',
    'brüste', 'buhn', 'fehler', 'schwachsinn', 'hintern', 'klitoris', 'schwanz', 'schwänze',
    'hahnmacher', 'kokos', 'mist', 'kümmel', 'stiche', 'hunde', 'phantasievoll', 'flat', 'flansch',
    'ziegen', 'hor', 'huhn', 'geil', 'ausleger', 'knüppel', 'idiot', 'geknallt', 'knaufende',
    'knopfkopf', 'knospen', 'knospead', 'lustig', 'nüsse', 'pfoten', 'rektum', 'verzögert',
    'felgen', 'schrauben', 'samen', 'geschlecht', 'schlitten', 'splitter', 'scherben', 'shank',
    'hoden', 'dord', 'wahnsinn', 'orgasmus', 'orgasmen', 'pornografie', 'masturbieren',
    'ejakulat', 'ejakuliert', 'ejakulation', 'beastialität', 'bestialität', 'telefonsex',
    'kugelbeutel', 'arschganz', 'skroat', 'skrote', 'skrotum', 'transen', 'jisma', 'nussack',
  ],
  es: [
    'aus', 'idiota', 'imbécil', 'idiotas', 'bolsa de bolas', 'bolas', 'bestia', 'bestialidad',
    'perra', 'perras', 'maldita sea', 'hueso', 'senos', 'negro', 'negros', 'entendido',
    'clítoris', 'masturbación', 'pene', 'penes negros grandes', 'gallos', 'colibrí', 'corrida',
    'cuñada', 'cuñas', 'ciberpolvo', 'cibernético', 'los ciberdelincuentes', 'ciberdelincuente',
    'perro', 'eyaculado', 'eyaculada', 'eyaculados', 'eyaculando', 'eyaculaciones', 'eyaculación',
    'grasa', 'caído', 'dedo', 'dedos', 'brida', 'maldición', 'fusibles', 'cabra', 'maldito',
    'más caliente', 'caliente', 'kno', 'lujuria', 'masoquista', 'bigotes', 'nueces', 'orgasmo',
    'orgasmos', 'peón', 'teléfonosex', 'chulos', 'orinar', 'enojada', 'meandos', 'meadas',
    'pispa', 'orina', 'meando', 'pornografía', 'vaginas', 'recto', 'retardado', 'sadista',
    'tornillo', 'escroto', 'sexo', 'sh', 'temblando', 'transexual', 'sunk', 'testículo',
    'titular', 'consoladores', 'culo completo', 'eyakulate', 'fcuting', 'polla grande',
    'a dólares',
  ],
  fr: [
    '5 heures', 'arrs', 'ânes', 'en dollars', "c'est ça", 'sac à bille', 'boules', 'sac à billes',
    'bête', 'bêteté', 'clocher', 'bestialité', 'sanglant', 'pipe', 'pipes', 'cliquetis', 'osseux',
    'sein', 'seins', 'bouchons', 'boucliers', 'poitrines', 'fesses', 'mégots', 'gros plan',
    'chine', 'clito', 'nut', 'coq', 'visage de coq', 'tête de coq', 'munche de coq', 'coq-muncher',
    'coqs', 'sucre de bite', 'pomme', 'pâte', 'cyberdépannage', 'évier', 'éviers', 'chienne',
    'doux', 'duché', 'pour', 'signalisation', 'foggitt', 'peaux', 'fany', 'gras', 'feu',
    'feuillage', 'infesté', 'taux de chute', 'culotte', 'avec les doigts', 'farcis',
    'frappe de poing', 'frappes de poing', 'fusils', 'bride', 'crétins', 'bandes', 'des gangs',
    'caprins', 'seigneur', 'dieu maudit', 'nom de dieu', 'arnaque', 'attaque', 'sabots', 'thorax',
    'les plus excités', 'excité', 'décollage', 'boutons', 'boutonné', 'bouton', 'tête de bouton',
    'jocky', 'boutonjokey', 'le kumming', 'des kums', '3 points', 'luxure', 'lustre',
    'masochiste', 'maître-bateau', 'maître', 'les', '4 h', 'engourdissements', 'sac à noix',
    'orgasme', 'orgasmes', 'sur gage', 'pic', 'pénis', 'téléphonex', 'purée', 'ouvrés', 'ouvrage',
    'maquereau', 'en colère', 'pique', 'les briques', 'tablier', 'pousse', 'jante', 'sadique',
    'vissage', 'scrotte', 'sexe', 'oui', "s'il vous plaît", 'sciages', 'transexuelle', 'crétin',
    'sankk', 'croûte', 'tétons', 'et toi', 'testique', 'testicule', 'titre', 'lancer', 'tuyau',
    'détecteur', 'vagin', 'vulve', 'gland', 'souris', 'walies', 'pornographie mettant en scène des enfants',
    'éjaculation', 'éjaculations', 'éjaculate', 'pédé', 'gode', 'godes', 'merdeux',
    "d'ânes", 'bite', // "bite" is English too
  ],
  it: [
    'balle', 'battere', 'biga', 'brinca', 'cadavere', 'casci', 'cozza', 'fava', 'femminuccia',
    'mona', 'monta', 'montare', 'nave scuola', 'pesce', 'porca', 'porco', 'regina', 'sbattere',
    'sbattersi', 'spagnola', 'tirare', 'vacca', 'vangare', 'zio cantante', 'quaglia', 'ruffiano',
    'pompa', 'lofare', 'loffa', 'loffare', 'bagnarsi', 'imbecille', 'palle', 'palloso',
    'mannaggia', 'porca miseria', 'guardone', 'cesso', 'pisello', 'patacca', 'picio', 'topa',
    'sega', 'pippa', 'pippone', 'pistolotto', 'goldone', 'pomiciare', 'anale', 'arrapato',
    'bocchino', 'finocchio', 'chiappa', 'pesce', 'pincare', 'padulo', 'lecchino', 'fracicone',
    'ciospo', 'tarzanello', 'rizzarsi', 'succhione', 'assatanato', 'allupato', 'ammucchiata',
    'bagascia', 'bagassa', 'caciocappella', 'brinca', 'pipì', 'sverginare', 'slinguare', 'soccia',
    'bordello', // an English word too
  ],
};

/** Common obscenities the package's lists lack. */
// biome-ignore format: word lists read better packed than one word a line
const MISSING: Record<(typeof OTHER_LANGUAGES)[number], string[]> = {
  de: [
    'hurensohn', 'hurensöhne', 'ficken', 'fickt', 'fickte', 'scheißdreck', 'drecksau',
    'miststück', 'wichsen', 'arschgeige', 'fotzen',
  ],
  es: [
    'coño', 'joder', 'jodido', 'jodida', 'jódete', 'gilipollas', 'pendejo', 'pendeja', 'pendejos',
    'verga', 'chingar', 'chingada', 'chingado', 'cojones', 'malparido', 'hijueputa', 'culero',
  ],
  fr: [
    'connasse', 'connards', 'couilles', 'couillon', 'niquer', 'nique', 'foutre', 'enculer',
    'salaud', 'salauds', 'pétasse', 'putes', 'chier',
  ],
  it: ['fanculo', 'cazzi', 'stronzi', 'puttane', 'troie', 'porco dio'],
};

/** Stems obscene whatever follows them in the word: German compounds ("Scheißkerl", "scheißegal"). */
const STEMS: Partial<Record<(typeof OTHER_LANGUAGES)[number], string[]>> = { de: ['scheiß'] };

/**
 * Innocent phrases holding a word of these lists: a match inside one is not reported. Adolf Fick
 * and his law are phrases rather than a surname after any given name (names.ts): German writes
 * nouns with a capital, so a capitalised word before "Fick" is no mark of a name.
 */
export const OTHER_INNOCENT = [
  'cul de sac',
  'culs de sac',
  'adolf fick',
  "fick's law",
  "fick's laws",
  "fick's first law",
  "fick's second law",
  "fick's principle",
  'fick principle',
  "fick'sche",
  "fick'schen",
  "fick'sches",
];

/** Letters, with spaces, hyphens and apostrophes inside: no digits, symbols or grawlix. */
const WORD = /^[\p{L}][\p{L}' -]*[\p{L}]$/u;

/**
 * Each checked language's words: its list less English words, innocent words and non-words, plus
 * the words it lacks; each word is its own term.
 */
export function otherLanguageWords(): WordSource[] {
  const english = new Set(profaneWords.get('en') ?? []);
  const sources: WordSource[] = [];
  for (const language of OTHER_LANGUAGES) {
    const innocent = new Set(INNOCENT[language]);
    const words = (profaneWords.get(language) ?? [])
      .map((word) => word.toLowerCase().trim())
      .filter((word) => WORD.test(word) && !english.has(word) && !innocent.has(word));
    for (const word of new Set([...words, ...MISSING[language]])) {
      sources.push({ language, term: word, forms: [word] });
    }
    for (const stem of STEMS[language] ?? []) {
      sources.push({ language, term: stem, forms: [], prefixes: [stem] });
    }
  }
  return sources;
}

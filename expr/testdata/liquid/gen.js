// Renders every template of cases.json against data.json with the liquidjs
// npm package and writes the outputs to expected.json, the goldens that
// expr's TestLiquidGoldens compares Rune's Liquid with.
//
//   npm install --prefix /tmp/ljs liquidjs@10.30.1
//   NODE_PATH=/tmp/ljs/node_modules node expr/testdata/liquid/gen.js          # write expected.json
//   NODE_PATH=/tmp/ljs/node_modules node expr/testdata/liquid/gen.js --check  # exit 1 when it differs
//
// Rune's templates name context values with a "$" ($trigger.name); liquidjs
// identifiers cannot start with "$", so it is dropped here (the data names
// have none). Dates render in UTC, as Rune's do.
'use strict';
process.env.TZ = 'UTC';
const fs = require('fs');
const path = require('path');
const PINNED = '10.30.1';
const { Liquid } = require('liquidjs');
const version = require('liquidjs/package.json').version;
if (version !== PINNED) {
  console.error(`gen.js: liquidjs ${version} found, the goldens come from ${PINNED}`);
  process.exit(2);
}
const dir = __dirname;
const cases = JSON.parse(fs.readFileSync(path.join(dir, 'cases.json'), 'utf8'));
const data = JSON.parse(fs.readFileSync(path.join(dir, 'data.json'), 'utf8'));
const engine = new Liquid({ timezoneOffset: 0 });
const out = {};
for (const c of cases) {
  const src = c.template.replace(/\$([A-Za-z_])/g, '$1');
  try {
    out[c.name] = { output: engine.parseAndRenderSync(src, data) };
  } catch (e) {
    out[c.name] = { error: String(e.message).split('\n')[0] };
  }
}
const text = JSON.stringify({ liquidjs: version, cases: out }, null, 1) + '\n';
const file = path.join(dir, 'expected.json');
if (process.argv.includes('--check')) {
  if (fs.readFileSync(file, 'utf8') !== text) {
    console.error('gen.js: liquidjs ' + version + ' renders differently from expected.json; run gen.js and review the diff');
    process.exit(1);
  }
  console.log(`gen.js: ${cases.length} goldens match liquidjs ${version}`);
} else {
  fs.writeFileSync(file, text);
  console.log(`gen.js: wrote ${cases.length} goldens from liquidjs ${version}`);
}

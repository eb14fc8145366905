// cdx_validate.js - validates a CycloneDX JSON file against the official 1.6
// JSON schema shipped in @cyclonedx/cyclonedx-library (res/schema), with ajv.
// Usage: node cdx_validate.js BOM.json ; exit 0 valid, 1 invalid (errors printed).
'use strict';
const fs = require('fs');
const path = require('path');
const nm = path.join(__dirname, '..', 'node', 'node_modules');
const Ajv = require(path.join(nm, 'ajv')).default;
const addFormats = require(path.join(nm, 'ajv-formats'));
const dir = path.join(nm, '@cyclonedx', 'cyclonedx-library', 'res', 'schema');
const load = (f) => JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8'));

const ajv = new Ajv({ strict: false, allErrors: true });
addFormats(ajv);
// ajv-formats lacks the two RFC 3987 / RFC 6531 formats the schema names;
// check them loosely (no white space; one '@') rather than not at all
ajv.addFormat('iri-reference', /^\S*$/);
ajv.addFormat('idn-email', /^[^\s@]+@[^\s@]+$/);
// the BOM schema refers to these two relative to its own $id
const base = 'http://cyclonedx.org/schema/';
for (const f of ['spdx.SNAPSHOT.schema.json', 'jsf-0.82.SNAPSHOT.schema.json']) {
  const s = load(f);
  delete s.$id;
  ajv.addSchema(s, base + f);
}
const validate = ajv.compile(load('bom-1.6.SNAPSHOT.schema.json'));
const bom = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
if (validate(bom)) {
  console.log(`valid CycloneDX ${bom.specVersion}: ${(bom.components || []).length} components`);
  process.exit(0);
}
console.log(JSON.stringify(validate.errors, null, 1));
process.exit(1);

/* The PSEO release explorer. Data files are scripts beside this page (data/*.js) that call
   PSEO.add(name, value): a page opened from disk may load scripts, not fetch files. The
   release's facts load with the page; each institution's or state's file loads when it is
   chosen (lazily: a national release has thousands). Nothing comes from the network. */
"use strict";

const PSEO = (() => {
  const store = {};
  const waiting = {};
  function add(name, value) {
    store[name] = value;
    (waiting[name] || []).forEach(([resolve]) => resolve(value));
    delete waiting[name];
  }
  function load(name) {
    if (name in store) return Promise.resolve(store[name]);
    return new Promise((resolve, reject) => {
      const first = !(name in waiting);
      (waiting[name] = waiting[name] || []).push([resolve, reject]);
      if (!first) return;
      const tag = document.createElement("script");
      tag.src = "data/" + name + ".js";
      tag.onerror = () => {
        (waiting[name] || []).forEach(([, fail]) => fail(new Error("cannot read data/" + name + ".js")));
        delete waiting[name];
      };
      document.head.appendChild(tag);
    });
  }
  return { add, load, store };
})();

const App = (() => {
  // Okabe-Ito: distinguishable with every common colour-vision deficiency
  const PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"];
  const PLOT_CONFIG = { displaylogo: false, responsive: true };
  const SUPPRESSED = "s";
  let facts, board = null;
  const chosen = { unit: null, data: null, state: null };
  const $ = (id) => document.getElementById(id);

  const word = (v) => (v === SUPPRESSED ? "suppressed" : "not available");
  const isNumber = (v) => typeof v === "number";
  const dollars = (v) => "$" + Math.round(v).toLocaleString("en-US");
  const count = (v) => v.toLocaleString("en-US");
  function show(v, format) {
    return isNumber(v) ? format(v) : null;
  }
  function flagTitle(v) {
    return v === SUPPRESSED ? facts.labels.flag["5"] : facts.labels.flag["-1"];
  }
  function cell(tag, value, format, attrs) {
    const el = document.createElement(tag);
    const text = show(value, format || count);
    if (text === null) {
      el.textContent = word(value);
      el.className = "word";
      el.title = flagTitle(value);
    } else el.textContent = text;
    Object.entries(attrs || {}).forEach(([k, v]) => el.setAttribute(k, v));
    return el;
  }
  function textCell(tag, text, attrs) {
    const el = document.createElement(tag);
    el.textContent = text;
    Object.entries(attrs || {}).forEach(([k, v]) => el.setAttribute(k, v));
    return el;
  }
  function table(id, caption, head, rows) {
    const t = $(id);
    t.replaceChildren();
    t.createCaption().textContent = caption;
    const tr = t.createTHead().insertRow();
    head.forEach((h) => tr.appendChild(textCell("th", h, { scope: "col" })));
    const body = t.createTBody();
    rows.forEach((cells) => {
      const row = body.insertRow();
      cells.forEach((c) => row.appendChild(c));
    });
  }
  function option(select, value, text) {
    const o = document.createElement("option");
    o.value = value;
    o.textContent = text;
    select.appendChild(o);
    return o;
  }
  function fill(select, entries, keep) {
    const before = keep && select.value;
    select.replaceChildren();
    entries.forEach(([value, text, group]) => {
      if (group) {
        let g = [...select.children].find((c) => c.tagName === "OPTGROUP" && c.label === group);
        if (!g) { g = document.createElement("optgroup"); g.label = group; select.appendChild(g); }
        option(g, value, text);
      } else option(select, value, text);
    });
    if (before && entries.some(([v]) => v === before)) select.value = before;
  }
  function plot(id, traces, layout, summary) {
    const el = $(id);
    el.setAttribute("aria-label", summary);
    const base = { margin: { t: 40, r: 10, b: 60, l: 70 }, font: { size: 13 },
                   legend: { orientation: "h", x: 0, y: 1.02, yanchor: "bottom" }, colorway: PALETTE };
    Plotly.react(el, traces, Object.assign(base, layout), PLOT_CONFIG);
  }
  function note(id, text) { $(id).textContent = text; }

  // the chosen cell
  const key = () => [$("degree").value, $("field").value, $("cohort").value].join("|");
  const years = () => Number($("years").value);
  const isState = (unit) => unit.length === 2;
  const unitName = (unit) => isState(unit)
    ? "all institutions in " + facts.states.find((s) => s.fips === unit).name
    : facts.institutions.find((i) => i.id === unit).name;
  const cipTitle = (code) => (code === "00" ? "All fields" : code + " " + (facts.labels.cip[code] || ""));
  const dollarYear = () => (facts.dollars.published ? facts.dollars.published + " dollars" : "the release's dollars");

  function cohortText(cohort, span) {
    if (cohort === facts.all_cohorts) return "All cohorts";
    const first = Number(cohort);
    return span ? first + "–" + (first + span - 1) : String(first);
  }
  function cellKeys(data) {
    return [...new Set([...Object.keys(data.earnings), ...Object.keys(data.flows)])];
  }
  function describe() {
    const [degree, cip, cohort] = key().split("|");
    return unitName(chosen.unit) + ", " + facts.labels.degree[degree] + ", " + cipTitle(cip) + ", " +
      cohortText(cohort, (chosen.data.earnings[key()] || [])[0]);
  }

  // selectors
  function fillStates() {
    fill($("state"), facts.states.map((s) => [s.fips, s.name]));
  }
  function fillUnits() {
    const st = $("state").value;
    const insts = facts.institutions.filter((i) => i.state === st && facts.units.includes(i.id))
      .sort((a, b) => a.name.localeCompare(b.name));
    const entries = facts.units.includes(st) ? [[st, "All institutions in the state (state figures)"]] : [];
    fill($("unit"), entries.concat(insts.map((i) => [i.id, i.name])));
  }
  function fillCells() {
    const keys = cellKeys(chosen.data).map((k) => k.split("|"));
    const degrees = [...new Set(keys.map((k) => k[0]))].sort();
    fill($("degree"), degrees.map((d) => [d, facts.labels.degree[d] || d]), true);
    fillFields(keys);
  }
  function fillFields(keys) {
    keys = keys || cellKeys(chosen.data).map((k) => k.split("|"));
    const d = $("degree").value;
    const cips = [...new Set(keys.filter((k) => k[0] === d).map((k) => k[1]))].sort();
    const group = (c) => (c === "00" ? "" : c.length === 2 ? "2-digit CIP" : "4-digit CIP");
    fill($("field"), cips.map((c) => [c, cipTitle(c), group(c)]), true);
    fillCohorts(keys);
  }
  function fillCohorts(keys) {
    keys = keys || cellKeys(chosen.data).map((k) => k.split("|"));
    const d = $("degree").value, c = $("field").value;
    const cohorts = [...new Set(keys.filter((k) => k[0] === d && k[1] === c).map((k) => k[2]))].sort();
    fill($("cohort"), cohorts.map((y) => {
      const row = chosen.data.earnings[[d, c, y].join("|")];
      return [y, cohortText(y, row ? row[0] : 0)];
    }), true);
  }

  async function chooseUnit() {
    const unit = $("unit").value;
    note("status", "Loading " + unitName(unit) + "…");
    const loads = [PSEO.load("u_" + unit)];
    const st = isState(unit) ? null : facts.institutions.find((i) => i.id === unit).state;
    if (st && facts.units.includes(st)) loads.push(PSEO.load("u_" + st));
    try {
      const [data, state] = await Promise.all(loads);
      Object.assign(chosen, { unit, data, state: state || null });
    } catch (err) {
      note("status", String(err.message));
      return;
    }
    fillCells();
    render();
  }

  // views
  function renderEarnings() {
    const row = chosen.data.earnings[key()];
    const state = chosen.state ? chosen.state.earnings[key()] : null;
    const fields = facts.earnings_fields;
    const at = (r, k, m) => (r ? r[1 + fields.indexOf("y" + k + "_" + m)] : undefined);
    const ks = facts.years_after;
    note("earnings-note", "Annual earnings of graduates with earnings, in " + dollarYear() +
      ": median (bar) and 25th to 75th percentile (line), " + (chosen.state
        ? "beside the same degree, field and cohort for all institutions of the state."
        : "for all institutions of the state (the schema publishes no national earnings)."));
    const head = ["Years after graduation", "25th percentile", "Median", "75th percentile", "Graduates with earnings"];
    if (chosen.state) head.push("State median");
    const rows = ks.map((k) => {
      const cells = [textCell("th", k + " year" + (k > 1 ? "s" : ""), { scope: "row" })];
      facts.percentiles.forEach((p) => cells.push(cell("td", at(row, k, "p" + p + "_earnings"), dollars,
        { "data-field": "y" + k + "_p" + p + "_earnings" })));
      cells.push(cell("td", at(row, k, "grads_earn"), count, { "data-field": "y" + k + "_grads_earn" }));
      if (chosen.state) cells.push(cell("td", at(state, k, "p50_earnings"), dollars, { "data-field": "state_y" + k + "_p50_earnings" }));
      return cells;
    });
    table("earnings-table", "Earnings, " + dollarYear() + ": " + describe(), head, rows);
    const trace = (r, name, color) => {
      const p50 = ks.map((k) => at(r, k, "p50_earnings"));
      const lo = ks.map((k, n) => (isNumber(at(r, k, "p25_earnings")) && isNumber(p50[n]) ? p50[n] - at(r, k, "p25_earnings") : 0));
      const hi = ks.map((k, n) => (isNumber(at(r, k, "p75_earnings")) && isNumber(p50[n]) ? at(r, k, "p75_earnings") - p50[n] : 0));
      return { type: "bar", name, x: ks.map((k) => k + " yr"), marker: { color },
               y: p50.map((v) => (isNumber(v) ? v : null)),
               text: p50.map((v) => (isNumber(v) ? dollars(v) : word(v))), textposition: "outside",
               error_y: { type: "data", symmetric: false, array: hi, arrayminus: lo, color: "#333" },
               hovertemplate: "%{x}: median %{text}<extra>" + name + "</extra>" };
    };
    const traces = [trace(row, "This selection", PALETTE[0])];
    if (chosen.state) traces.push(trace(state, "State", PALETTE[1]));
    plot("earnings-chart", traces, { barmode: "group", yaxis: { title: { text: "Earnings (" + dollarYear() + ")" }, tickprefix: "$", rangemode: "tozero" },
      xaxis: { title: { text: "Years after graduation" } } },
      "Median earnings at 1, 5 and 10 years after graduation: " + ks.map((k) => k + " years " +
        (isNumber(at(row, k, "p50_earnings")) ? dollars(at(row, k, "p50_earnings")) : word(at(row, k, "p50_earnings")))).join("; "));
  }

  function binText(b) {
    return "$" + count(b[0]) + "–" + count(b[1]);
  }
  function renderHistogram() {
    const k = years();
    const counts = chosen.data.histograms[key() + "|" + k];
    const bins = facts.bins;
    const binYear = facts.dollars.bins ? facts.dollars.bins + " dollars" : "the bins' dollars";
    note("histogram-note", counts
      ? "Noisy counts of graduates per earnings bin at " + k + " years after graduation, bin edges in " + binYear +
        " (the percentiles are read from these counts, then converted to " + dollarYear() + "). Noise can make a count negative."
      : "No histogram is published for this selection at " + k + " years after graduation (not yet observable, or not measured).");
    const rows = (counts || []).map((c, n) => [textCell("th", String(n + 1), { scope: "row" }),
      textCell("td", "$" + count(bins[n][0])), textCell("td", "$" + count(bins[n][1])),
      textCell("td", count(c), { "data-field": "bin" + (n + 1) })]);
    table("histogram-table", "Histogram at " + k + " years, bin edges in " + binYear + ": " + describe(),
      ["Bin", "Lower edge", "Upper edge", "Noisy count of graduates"], rows);
    plot("histogram-chart", counts ? [{ type: "bar", x: bins.map(binText), y: counts, marker: { color: PALETTE[0] },
      hovertemplate: "%{x}: %{y} graduates<extra></extra>" }] : [],
      { xaxis: { title: { text: "Annual earnings bin (" + binYear + ")" }, tickangle: -45, automargin: true },
        yaxis: { title: { text: "Graduates (noisy count)" } } },
      counts ? "Histogram of " + bins.length + " earnings bins; total noisy count " + count(counts.reduce((a, b) => a + b, 0)) : "No histogram");
  }

  function renderFlows() {
    const k = years();
    const f = (chosen.data.flows[key()] || {})["y" + k];
    const sectors = facts.sectors, divisions = facts.divisions;
    const ind = facts.labels.industry, div = facts.labels.division;
    if (!f) {
      note("flows-note", "No flows are published for this selection (pseof has all fields and 2-digit CIP fields).");
      ["flows-industry-table", "flows-division-table", "flows-matrix-table"].forEach((id) => $(id).replaceChildren());
      plot("flows-chart", [], {}, "No flows");
      return;
    }
    note("flows-note", "Graduates employed " + k + " year" + (k > 1 ? "s" : "") + " after graduation, by NAICS sector and Census division of " +
      "their employer (noisy, corrected counts). The diagram's widths are the published counts; suppressed and zero flows are left out.");
    const national = f.emp.slice(0, sectors.length + 1);
    const byDivision = f.emp.slice(sectors.length + 1);
    // diagram: the graduates -> sector (nation) and not employed; sector -> division
    const labels = ["Graduates"].concat(sectors.map((s) => ind[s] || s), ["Not employed"], divisions.map((d) => div[d] || d));
    const source = [], target = [], value = [];
    sectors.forEach((s, n) => { if (isNumber(national[n + 1]) && national[n + 1] > 0) { source.push(0); target.push(n + 1); value.push(national[n + 1]); } });
    if (isNumber(f.nme) && f.nme > 0) { source.push(0); target.push(sectors.length + 1); value.push(f.nme); }
    const matrix = {};
    for (let i = 0; i < f.sectors.length; i += 2) {
      const [, d, s] = facts.flow_destinations[f.sectors[i]];
      matrix[d + "|" + s] = f.sectors[i + 1];
      if (isNumber(f.sectors[i + 1]) && f.sectors[i + 1] > 0) {
        source.push(1 + sectors.indexOf(s)); target.push(sectors.length + 2 + divisions.indexOf(d)); value.push(f.sectors[i + 1]);
      }
    }
    const colors = labels.map((_, n) => (n === 0 ? "#555555" : PALETTE[n % PALETTE.length]));
    plot("flows-chart", value.length === 0 ? [] : [{ type: "sankey", orientation: "h", arrangement: "snap",
      node: { label: labels, color: colors, pad: 8, thickness: 14 },
      link: { source, target, value, color: "rgba(0,114,178,0.25)" } }],
      { margin: { t: 10, r: 10, b: 10, l: 10 } },
      "Flow diagram: " + (isNumber(national[0]) ? count(national[0]) : word(national[0])) + " graduates employed, " +
        (isNumber(f.nme) ? count(f.nme) : word(f.nme)) + " not employed");
    const rows = [[textCell("th", "All industries", { scope: "row" }), cell("td", national[0], count, { "data-field": "y" + k + "_grads_emp" }),
      cell("td", f.instate[0], count, { "data-field": "y" + k + "_grads_emp_instate" })]];
    sectors.forEach((s, n) => rows.push([textCell("th", s + " " + (ind[s] || ""), { scope: "row" }),
      cell("td", national[n + 1]), cell("td", f.instate[n + 1])]));
    rows.push([textCell("th", "Not employed", { scope: "row" }), cell("td", f.nme, count, { "data-field": "y" + k + "_grads_nme" }), textCell("td", "")]);
    table("flows-industry-table", "Graduates by industry, nation, " + k + " years after: " + describe(),
      ["Industry (NAICS sector)", "Employed", "Employed in the institution's state"], rows);
    table("flows-division-table", "Employed graduates by Census division of the employer, all industries",
      ["Census division", "Employed"], divisions.map((d, n) => [textCell("th", div[d] || d, { scope: "row" }), cell("td", byDivision[n])]));
    table("flows-matrix-table", "Employed graduates by industry and Census division",
      ["Industry"].concat(divisions.map((d) => div[d] || d)),
      sectors.map((s) => [textCell("th", s + " " + (ind[s] || ""), { scope: "row" })].concat(
        divisions.map((d) => cell("td", d + "|" + s in matrix ? matrix[d + "|" + s] : 0)))));
  }

  function renderCounts() {
    const row = chosen.data.earnings[key()];
    const flows = chosen.data.flows[key()];
    const ks = facts.years_after;
    const ipeds = (k) => (row ? row[1 + facts.earnings_fields.length + facts.ipeds_fields.indexOf("y" + k + "_ipeds_count")] : undefined);
    const ipedsFlag = (k) => (row ? row[1 + facts.earnings_fields.length + facts.ipeds_fields.length + facts.ipeds_fields.indexOf("y" + k + "_ipeds_count")] : undefined);
    const earn = (k) => (row ? row[1 + facts.earnings_fields.indexOf("y" + k + "_grads_earn")] : undefined);
    const emp = (k) => (flows ? flows["y" + k].emp[0] : undefined);
    const nme = (k) => (flows ? flows["y" + k].nme : undefined);
    note("counts-note", "Graduates of the selection: IPEDS completions (with IPEDS's flag in words), graduates with earnings (pseoe), employed and not employed (pseof).");
    table("counts-table", "Counts of graduates: " + describe(),
      ["Years after graduation", "IPEDS graduates", "IPEDS count", "With earnings", "Employed", "Not employed"],
      ks.map((k) => [textCell("th", k + " year" + (k > 1 ? "s" : ""), { scope: "row" }),
        cell("td", ipeds(k), count, { "data-field": "y" + k + "_ipeds_count" }),
        textCell("td", ipedsFlag(k) ? facts.labels.ipeds_flag[ipedsFlag(k)] : "", { class: "text" }),
        cell("td", earn(k)), cell("td", emp(k)), cell("td", nme(k))]));
    const series = [["IPEDS graduates", ipeds], ["With earnings", earn], ["Employed", emp], ["Not employed", nme]];
    plot("counts-chart", series.map(([name, f], n) => ({ type: "bar", name, x: ks.map((k) => k + " yr"),
      y: ks.map((k) => (isNumber(f(k)) ? f(k) : null)), marker: { color: PALETTE[n] } })),
      { barmode: "group", yaxis: { title: { text: "Graduates" }, rangemode: "tozero" }, xaxis: { title: { text: "Years after graduation" } } },
      "Counts of graduates at 1, 5 and 10 years after graduation");
  }

  function renderBoard() {
    if (!board) return;
    // expected error against cell size
    const strata = [...new Set(board.accuracy.filter((r) => !r.all_sizes).map((r) => r.size))];
    const row = chosen.data.earnings[key()];
    const n1 = row ? row[1 + facts.earnings_fields.indexOf("y1_grads_earn")] : undefined;
    plot("accuracy-chart", facts.percentiles.map((p, i) => ({ type: "scatter", mode: "lines+markers", name: p + "th percentile",
      x: strata, y: strata.map((s) => (board.accuracy.find((r) => r.size === s && r.percentile === p) || {}).mean_abs_error),
      line: { color: PALETTE[i] }, marker: { symbol: ["circle", "square", "diamond"][i] } })),
      { xaxis: { title: { text: "Cell size (published noisy count of graduates with earnings)" } },
        yaxis: { title: { text: "Mean absolute error (dollars)" }, tickprefix: "$", rangemode: "tozero" } },
      "Expected mean absolute error of the percentiles by cell size");
    note("accuracy-note", "From the DRB report's simulation (fresh noise added to the published histograms). " +
      (isNumber(n1) ? "The selected cell has " + count(n1) + " graduates with earnings at 1 year." : "The selected cell's earnings at 1 year are " + word(n1) + "."));
    table("accuracy-table", "Expected accuracy of the published percentiles by cell size",
      ["Cell size", "Percentile", "Cells", "Mean relative accuracy", "Median relative accuracy", "Mean absolute error"],
      board.accuracy.map((r) => [textCell("th", r.size, { scope: "row" }), textCell("td", String(r.percentile)), textCell("td", count(r.cells)),
        textCell("td", r.mean_accuracy.toFixed(3)), textCell("td", r.median_accuracy.toFixed(3)), textCell("td", dollars(r.mean_abs_error))]));
    // suppression map: the institutions of the chosen state by degree level
    const st = $("state").value;
    const insts = facts.institutions.filter((i) => i.state === st && board.suppression[i.id]);
    const degrees = [...new Set(insts.flatMap((i) => Object.keys(board.suppression[i.id])))].sort();
    const share = (i, d) => { const c = board.suppression[i.id][d]; return c && c[0] + c[1] ? c[0] / (c[0] + c[1]) : null; };
    plot("suppression-chart", [{ type: "heatmap", colorscale: "Viridis", zmin: 0, zmax: 1,
      x: degrees.map((d) => facts.labels.degree[d] || d), y: insts.map((i) => i.name),
      z: insts.map((i) => degrees.map((d) => share(i, d))), colorbar: { title: { text: "share suppressed" } },
      hovertemplate: "%{y}, %{x}: %{z:.0%} of medians suppressed<extra></extra>" }],
      { margin: { t: 10, r: 10, b: 120, l: 220 }, xaxis: { automargin: true }, yaxis: { automargin: true } },
      "Share of suppressed medians by institution and degree level");
    note("suppression-note", "Share of the published earnings medians (every field, cohort and year after) that are suppressed (fewer than the publication threshold), institutions of the chosen state.");
    // epsilon by product
    plot("epsilon-chart", [{ type: "bar", orientation: "h", x: board.epsilon.map((e) => e.value), y: board.epsilon.map((e) => e.product),
      marker: { color: PALETTE[0] }, text: board.epsilon.map((e) => e.epsilon), textposition: "auto" }],
      { margin: { t: 10, r: 10, b: 50, l: 220 }, xaxis: { title: { text: "Epsilon spent in this release" }, rangemode: "tozero" }, yaxis: { automargin: true } },
      "Epsilon by product");
    table("epsilon-table", "Epsilon by product (this release " + board.release_epsilon + ", lifetime cap " + board.lifetime_cap + ")",
      ["Product", "Epsilon"], board.epsilon.map((e) => [textCell("th", e.product, { scope: "row" }), textCell("td", e.epsilon)]));
    // lifetime budget per population
    const all = Object.values(board.lifetime).flat().map((r) => Number(r[4]));
    plot("lifetime-chart", [{ type: "histogram", x: all, marker: { color: PALETTE[2] }, name: "populations" }],
      { xaxis: { title: { text: "Lifetime epsilon after this release (cap " + board.lifetime_cap + ")" }, range: [0, Number(board.lifetime_cap)] },
        yaxis: { title: { text: "Populations (institution x degree x cohort)" } } },
      "Lifetime epsilon of every population after this release");
    note("lifetime-note", "Every population measured (institution x degree level x graduation cohort), its lifetime epsilon after this release; the largest is " +
      board.max_lifetime + " of the cap " + board.lifetime_cap + ". The table lists the populations of the chosen institution.");
    const mine = board.lifetime[chosen.unit] || [];
    table("lifetime-table", "Lifetime epsilon: " + unitName(chosen.unit), ["Degree level", "Cohort", "Before", "This release", "After"],
      mine.map((r) => [textCell("th", facts.labels.degree[r[0]] || r[0], { scope: "row" }), textCell("td", r[1]), textCell("td", r[2]), textCell("td", r[3]), textCell("td", r[4])]));
  }

  const VIEWS = { earnings: renderEarnings, histogram: renderHistogram, flows: renderFlows, counts: renderCounts, board: renderBoard };
  function current() {
    return document.querySelector("[role=tab][aria-selected=true]").id.replace("tab-", "");
  }
  function render() {
    if (!chosen.data) return;
    if (!cellKeys(chosen.data).includes(key())) { note("status", "No published cell for this choice."); return; }
    VIEWS[current()]();
    note("status", "Showing " + describe() + ".");
    document.body.dataset.ready = key() + "|" + chosen.unit + "|" + current();
  }
  function selectTab(tab, focus) {
    document.querySelectorAll("[role=tab]").forEach((t) => {
      const on = t === tab;
      t.setAttribute("aria-selected", on);
      t.tabIndex = on ? 0 : -1;
      $(t.getAttribute("aria-controls")).hidden = !on;
    });
    if (focus) tab.focus();
    render();
  }
  function tabKeys(event) {
    const tabs = [...document.querySelectorAll("[role=tab]:not([hidden])")];
    const at = tabs.indexOf(document.activeElement);
    const to = { ArrowRight: at + 1, ArrowLeft: at - 1, Home: 0, End: tabs.length - 1 }[event.key];
    if (to === undefined || at < 0) return;
    event.preventDefault();
    selectTab(tabs[(to + tabs.length) % tabs.length], true);
  }

  async function start() {
    facts = PSEO.store.release;
    if (!facts) { note("status", "The release's data (data/release.js) did not load."); return; }
    const v = facts.version[0] || "";
    $("release-line").textContent = "Release " + (facts.release || "") + " (" + (v.split(" ")[5] || "") + ")" +
      ": " + facts.institutions.length + " institutions in " + facts.states.length + " states. Earnings in " + dollarYear() +
      ". Made from the release's public files, on this computer: nothing is loaded from the network.";
    fill($("years"), facts.years_after.map((k) => [String(k), k + " year" + (k > 1 ? "s" : "")]));
    fillStates();
    fillUnits();
    $("state").addEventListener("change", () => { fillUnits(); chooseUnit(); });
    $("unit").addEventListener("change", chooseUnit);
    $("degree").addEventListener("change", () => { fillFields(); render(); });
    $("field").addEventListener("change", () => { fillCohorts(); render(); });
    $("cohort").addEventListener("change", render);
    $("years").addEventListener("change", render);
    document.querySelectorAll("[role=tab]").forEach((t) => t.addEventListener("click", () => selectTab(t, false)));
    $("tabs").addEventListener("keydown", tabKeys);
    if (facts.board) {
      try {
        board = await PSEO.load("board");
        $("tab-board").hidden = false;
      } catch (err) { note("status", err.message); }
    }
    await chooseUnit();
  }
  return { start };
})();

document.addEventListener("DOMContentLoaded", App.start);

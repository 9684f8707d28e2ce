// Draws a trend figure whose x values are positions in the shared commit table
// (window.FW_COMMITS = [[sha, subject, author, date], ...], written once per site in
// assets/commits.js): hovers get SHA, subject, author and date, the marked x axis gets
// thinned "date / short SHA" tick labels. Pages without commit figures never call it.
// Traces whose x is "fwX" share the figure's x values, written once as [first, count] runs
// in layout.fwX.
function fwRuns(runs) {
  var x = [];
  runs.forEach(function (r) { for (var i = 0; i < r[1]; i++) x.push(r[0] + i); });
  return x;
}

// A y given as {fwD: [e, d0, d1, ...]} holds integer counts of 10^e as differences to the
// previous value (null: no value); dividing by an exact power of ten gives the short decimal.
function fwUnpack(packed) {
  var e = packed[0], last = 0, y = [];
  for (var i = 1; i < packed.length; i++) {
    if (packed[i] === null) { y.push(null); continue; }
    last += packed[i];
    y.push(e >= 0 ? last * Math.pow(10, e) : last / Math.pow(10, -e));
  }
  return y;
}

function fwPlot(id, data, layout, config) {
  var C = window.FW_COMMITS || [];
  var shared = layout.fwX ? fwRuns(layout.fwX) : null;
  delete layout.fwX;
  data.forEach(function (t) {
    if (t.x === "fwX") t.x = shared;
    if (t.y && t.y.fwD) t.y = fwUnpack(t.y.fwD);
    if (t.fwCommits) {
      t.customdata = t.x.map(function (i) {
        var c = C[i] || ["", "", "", ""];
        return [c[0], c[1], c[2], c[3]];
      });
      delete t.fwCommits;
    }
  });
  Object.keys(layout).forEach(function (k) {
    var axis = layout[k];
    if (k.indexOf("xaxis") === 0 && axis.fwTicks) {
      axis.ticktext = axis.tickvals.map(function (i) {
        var c = C[i] || ["", "", "", ""];
        return c[3] + "<br>" + c[0].slice(0, 7);
      });
      delete axis.fwTicks;
    }
  });
  Plotly.newPlot(id, data, layout, config);
}

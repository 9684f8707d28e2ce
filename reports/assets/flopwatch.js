// Draws a trend figure whose x values are positions in the shared commit table
// (window.FW_COMMITS = [[sha, subject, author, date], ...], written once per site in
// assets/commits.js): hovers get SHA, subject, author and date, the marked x axis gets
// thinned "date / short SHA" tick labels. Pages without commit figures never call it.
function fwPlot(id, data, layout, config) {
  var C = window.FW_COMMITS || [];
  data.forEach(function (t) {
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

#include "ui/graph_data.h"

#include <graphviz/gvc.h>

#include <QRegularExpression>
#include <QStringList>
#include <mutex>
#include <set>

namespace tlui {

QString groupKeyOf(const std::string& scope) {
  const QStringList parts = QString::fromStdString(scope).split('.', Qt::SkipEmptyParts);
  for (int i = 1; i < parts.size(); ++i) {
    bool number = false;
    parts[i].toInt(&number);
    if (number) return parts.mid(0, i + 1).join('.');
  }
  return parts.size() > 1 ? parts[0] : QString();
}

std::vector<QString> groupKeys(const std::vector<tl::GraphNode>& graph) {
  std::vector<QString> keys(graph.size());
  std::map<uint64_t, size_t> index;
  for (size_t i = 0; i < graph.size(); ++i) {
    keys[i] = groupKeyOf(graph[i].scope);
    index[graph[i].id] = i;
  }
  // Unscoped computed nodes (input handling, glue between layers): each
  // connected run of them is one box, so hundreds of them do not flood the view.
  std::vector<size_t> parent(graph.size());
  for (size_t i = 0; i < parent.size(); ++i) parent[i] = i;
  auto find = [&](size_t x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  };
  auto loose = [&](size_t i) { return keys[i].isEmpty() && !graph[i].realized; };
  for (size_t i = 0; i < graph.size(); ++i) {
    if (!loose(i)) continue;
    for (uint64_t in : graph[i].inputs) {
      auto it = index.find(in);
      if (it != index.end() && loose(it->second)) parent[find(i)] = find(it->second);
    }
  }
  std::map<size_t, int> size;
  for (size_t i = 0; i < graph.size(); ++i)
    if (loose(i)) size[find(i)]++;
  // A run is named after the scope most of its nodes carry ("stem", "head"),
  // else "ops"; repeated names get "#2", "#3"...
  std::map<size_t, std::map<QString, int>> scopeVotes;
  for (size_t i = 0; i < graph.size(); ++i)
    if (loose(i) && !graph[i].scope.empty())
      scopeVotes[find(i)][QString::fromStdString(graph[i].scope).section('.', 0, 0)]++;
  std::map<size_t, QString> name;
  std::map<QString, int> used;
  for (size_t i = 0; i < graph.size(); ++i) {
    if (!loose(i) || size[find(i)] < 4) continue;
    size_t root = find(i);
    auto it = name.find(root);
    if (it == name.end()) {
      QString base = "ops";
      int best = 0;
      for (auto& [scope, votes] : scopeVotes[root])
        if (votes > best) best = votes, base = scope;
      int n = ++used[base];
      it = name.emplace(root, n == 1 ? base : QString("%1#%2").arg(base).arg(n)).first;
    }
    keys[i] = it->second;
  }
  // Weights and other buffers belong to the block that reads them when only
  // one block does.
  std::vector<QString> reader(graph.size());
  std::vector<bool> read(graph.size(), false), shared(graph.size(), false);
  for (size_t i = 0; i < graph.size(); ++i)
    for (uint64_t in : graph[i].inputs) {
      auto it = index.find(in);
      if (it == index.end()) continue;
      size_t j = it->second;
      if (!read[j]) {
        read[j] = true;
        reader[j] = keys[i];
      } else if (reader[j] != keys[i]) {
        shared[j] = true;
      }
    }
  for (size_t i = 0; i < graph.size(); ++i)
    if (graph[i].realized && keys[i].isEmpty() && read[i] && !shared[i]) keys[i] = reader[i];
  return keys;
}

std::map<uint64_t, int> kernelOfNodes(const std::vector<tl::ProfileRecord>& records) {
  std::map<uint64_t, int> out;
  for (size_t i = 0; i < records.size(); ++i) {
    for (uint64_t id : records[i].kernel->node_ids) out[id] = int(i);
    out[records[i].kernel->output_node] = int(i);
  }
  return out;
}

DisplayGraph buildOpGraph(const std::vector<tl::GraphNode>& graph, const std::vector<tl::ProfileRecord>& records,
                          const QSet<QString>& expanded) {
  DisplayGraph g;
  auto kernelOf = kernelOfNodes(records);
  std::map<uint64_t, int> displayOf;  // graph node id -> display node
  std::map<QString, int> groupNode;
  std::map<int, std::set<int>> groupKernels;
  const std::vector<QString> keys = groupKeys(graph);
  for (size_t i = 0; i < graph.size(); ++i) {
    const auto& n = graph[i];
    const QString& key = keys[i];
    auto k = kernelOf.find(n.id);
    int kernel = k == kernelOf.end() ? -1 : k->second;
    if (!key.isEmpty() && !expanded.contains(key)) {
      auto it = groupNode.find(key);
      if (it == groupNode.end()) {
        DisplayNode d;
        d.group = true;
        d.groupKey = key;
        it = groupNode.emplace(key, int(g.nodes.size())).first;
        g.nodes.push_back(d);
      }
      g.nodes[size_t(it->second)].members.push_back(n.id);
      if (kernel >= 0) groupKernels[it->second].insert(kernel);
      displayOf[n.id] = it->second;
      continue;
    }
    DisplayNode d;
    d.groupKey = key;
    d.members = {n.id};
    d.kernel = kernel;
    d.label = QString::fromStdString(n.op);
    if (kernel >= 0) d.seconds = records[size_t(kernel)].seconds;
    displayOf[n.id] = int(g.nodes.size());
    g.nodes.push_back(d);
  }
  for (auto& [index, kernels] : groupKernels)
    for (int k : kernels) g.nodes[size_t(index)].seconds += records[size_t(k)].seconds;
  for (auto& d : g.nodes)
    if (d.group) d.label = QString("%1\n%2 ops, %3 ms").arg(d.groupKey).arg(d.members.size()).arg(d.seconds * 1e3, 0, 'f', 2);
  std::set<std::pair<int, int>> seen;
  for (const auto& n : graph) {
    int to = displayOf[n.id];
    for (uint64_t in : n.inputs) {
      auto it = displayOf.find(in);
      if (it == displayOf.end() || it->second == to) continue;
      if (seen.insert({it->second, to}).second) g.edges.push_back({it->second, to});
    }
  }
  for (auto& d : g.nodes) g.maxSeconds = std::max(g.maxSeconds, d.seconds);
  return g;
}

DisplayGraph buildKernelGraph(const std::vector<tl::ProfileRecord>& records, const std::vector<tl::GraphNode>& graph,
                              const std::vector<std::pair<int, int>>& reads) {
  DisplayGraph g;
  // What a kernel reads: its recorded inputs, and the inputs of the nodes it
  // fused that it did not compute itself. A replayed launch records only the
  // realize's outside inputs, not what earlier kernels of the same realize
  // wrote (a whole Lite0 run is one realize: 0 edges), so the op graph the
  // run built says the rest.
  std::map<uint64_t, const tl::GraphNode*> byId;
  for (const auto& n : graph) byId[n.id] = &n;
  std::map<uint64_t, int> writer;  // node id -> newest kernel that wrote it
  std::set<std::pair<int, int>> seen;
  for (size_t i = 0; i < records.size(); ++i) {
    const auto& k = *records[i].kernel;
    DisplayNode d;
    d.kernel = int(i);
    d.seconds = records[i].seconds;
    d.label = QString("%1\n%2 ms").arg(QString::fromStdString(k.name)).arg(records[i].seconds * 1e3, 0, 'f', 3);
    d.members = k.node_ids;
    std::set<uint64_t> fused(k.node_ids.begin(), k.node_ids.end());
    std::vector<uint64_t> reads = k.input_nodes;
    for (uint64_t id : k.node_ids)
      if (auto it = byId.find(id); it != byId.end())
        for (uint64_t in : it->second->inputs)
          if (!fused.count(in)) reads.push_back(in);
    for (uint64_t in : reads) {
      auto it = writer.find(in);
      if (it != writer.end() && it->second != int(i) && seen.insert({it->second, int(i)}).second)
        g.edges.push_back({it->second, int(i)});
    }
    writer[k.output_node] = int(i);
    g.nodes.push_back(d);
    g.maxSeconds = std::max(g.maxSeconds, d.seconds);
  }
  const int n = int(records.size());
  for (auto [from, to] : reads)
    if (from >= 0 && from < n && to >= 0 && to < n && from != to && seen.insert({from, to}).second)
      g.edges.push_back({from, to});
  return g;
}

std::vector<std::pair<int, int>> kernelReadsFrom(const std::vector<tl::ProfileRecord>& shown,
                                                 const std::vector<tl::ProfileRecord>& run) {
  std::vector<int> shownOf(run.size(), -1);  // run record -> shown record
  size_t j = 0;
  for (size_t i = 0; i < shown.size(); ++i, ++j) {
    while (j < run.size() && run[j].kernel->source != shown[i].kernel->source) ++j;
    if (j == run.size()) return {};
    shownOf[j] = int(i);
  }
  std::vector<std::pair<int, int>> out;
  std::map<uint64_t, size_t> writer;  // node id -> the newest run record that wrote its buffer
  for (size_t r = 0; r < run.size(); ++r) {
    const tl::KernelInfo& k = *run[r].kernel;
    if (shownOf[r] >= 0)
      for (uint64_t in : k.input_nodes)
        if (auto it = writer.find(in); it != writer.end() && shownOf[it->second] >= 0)
          out.emplace_back(shownOf[it->second], shownOf[r]);
    writer[k.output_node] = r;
  }
  return out;
}

namespace {
std::mutex graphviz_mutex;

Agsym_t* declare(Agraph_t* g, int kind, const char* name, const char* fallback) {
  return agattr(g, kind, const_cast<char*>(name), const_cast<char*>(fallback));
}
}  // namespace

GraphLayout layoutGraph(const DisplayGraph& dg) {
  GraphLayout out;
  if (dg.nodes.empty()) return out;
  std::lock_guard<std::mutex> lock(graphviz_mutex);
  // One context for the life of the process: Graphviz's text-measuring plugin
  // caches font names across contexts, and freeing a context leaves that
  // cache pointing at freed memory (AddressSanitizer caught it).
  static GVC_t* gvc = gvContext();
  Agraph_t* g = agopen(const_cast<char*>("g"), Agdirected, nullptr);
  declare(g, AGRAPH, "rankdir", "TB");
  declare(g, AGRAPH, "nodesep", "0.25");
  declare(g, AGRAPH, "ranksep", "0.35");
  Agsym_t* shape = declare(g, AGNODE, "shape", "box");
  Agsym_t* label = declare(g, AGNODE, "label", "");
  Agsym_t* fontsize = declare(g, AGNODE, "fontsize", "10");
  Agsym_t* margin = declare(g, AGNODE, "margin", "0.08,0.04");
  Agsym_t* fixed = declare(g, AGNODE, "fixedsize", "false");
  Agsym_t* width = declare(g, AGNODE, "width", "0.75");
  Agsym_t* height = declare(g, AGNODE, "height", "0.5");
  (void)shape;
  (void)margin;
  std::vector<Agnode_t*> nodes;
  nodes.reserve(dg.nodes.size());
  for (size_t i = 0; i < dg.nodes.size(); ++i) {
    QByteArray name = QByteArray("n").append(QByteArray::number(qulonglong(i)));
    Agnode_t* n = agnode(g, name.data(), 1);
    QByteArray text = dg.nodes[i].label.toUtf8();
    agxset(n, label, text.data());
    if (dg.nodes[i].group) agxset(n, fontsize, const_cast<char*>("13"));
    if (dg.nodes[i].width > 0) {
      // The window draws the text with its own font: boxes sized by Qt's
      // metrics fit it, Graphviz's estimate may not.
      QByteArray w = QByteArray::number(dg.nodes[i].width / 72.0, 'f', 3);
      QByteArray h = QByteArray::number(dg.nodes[i].height / 72.0, 'f', 3);
      agxset(n, fixed, const_cast<char*>("true"));
      agxset(n, width, w.data());
      agxset(n, height, h.data());
    }
    nodes.push_back(n);
  }
  std::vector<Agedge_t*> edges;
  for (auto& e : dg.edges) edges.push_back(agedge(g, nodes[size_t(e.from)], nodes[size_t(e.to)], nullptr, 1));
  if (gvLayout(gvc, g, "dot") != 0) {
    out.error = "Graphviz could not lay out the graph";
  } else {
    boxf bb = GD_bb(g);
    out.width = bb.UR.x - bb.LL.x;
    out.height = bb.UR.y - bb.LL.y;
    auto flip = [&](pointf p) { return std::make_pair(p.x - bb.LL.x, bb.UR.y - p.y); };
    for (auto* n : nodes) {
      NodeLayout l;
      auto c = flip(ND_coord(n));
      l.x = c.first;
      l.y = c.second;
      l.w = ND_width(n) * 72.0;
      l.h = ND_height(n) * 72.0;
      out.nodes.push_back(l);
    }
    for (auto* e : edges) {
      EdgeLayout l;
      // agedge returns the existing edge for a repeated pair; the splines
      // live on whichever edge Graphviz kept, so an empty one stays empty.
      if (e && ED_spl(e) && ED_spl(e)->size > 0) {
        const bezier& b = ED_spl(e)->list[0];
        for (int i = 0; i < b.size; ++i) l.points.push_back(flip(b.list[i]));
        if (b.eflag) {
          l.hasTip = true;
          l.tip = flip(b.ep);
        }
      }
      out.edges.push_back(std::move(l));
    }
    gvFreeLayout(gvc, g);
  }
  agclose(g);
  return out;
}

}  // namespace tlui

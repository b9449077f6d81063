//! A mount's journal on attach: replaying its records over the base tree, and writing the
//! tree again as its difference from the base (which compacts the journal).

use super::*;

impl State {
    /// Applies a journal record (on attach).
    pub(super) fn replay(&mut self, r: &Record) -> Res<()> {
        let (parent, name) = match r {
            Record::Base { .. } => return Ok(()),
            Record::File { path, .. }
            | Record::Dir { path, .. }
            | Record::Tree { path, .. }
            | Record::Blob { path, .. }
            | Record::Link { path, .. }
            | Record::Remove { path }
            | Record::Perm { path, .. }
            | Record::Special { path, .. }
            | Record::HardLink { path, .. }
            | Record::Owner { path, .. }
            | Record::Times { path, .. } => self.parent_of(path)?,
            Record::Rename { from, to } => {
                let (p, n) = self.parent_of(from)?;
                let (tp, tn) = self.parent_of(to)?;
                return self.rename(p, &n, tp, &tn, false);
            }
        };
        match r {
            Record::File { upper, perm, .. } => {
                let size = std::fs::metadata(self.layer.upper(*upper))
                    .map_err(eio)?
                    .len();
                let file = FileNode {
                    content: Content::Upper {
                        n: *upper,
                        hashed: None,
                    },
                    size,
                    version: 0,
                };
                match self.child(parent, &name)? {
                    Some(ino) => {
                        let node = self.node_mut(ino)?;
                        node.kind = Kind::File(file);
                        node.perm = *perm;
                        self.touch(parent);
                    }
                    None => {
                        let owner = self.owner();
                        self.insert(parent, &name, *perm, owner, Kind::File(file))?;
                    }
                }
                Ok(())
            }
            Record::Dir { perm, .. } => {
                let owner = self.owner();
                self.mkdir(parent, &name, *perm, owner).map(|_| ())
            }
            Record::Link { target, .. } => {
                let owner = self.owner();
                self.symlink(parent, &name, target, owner).map(|_| ())
            }
            Record::Special { mode, rdev, .. } => {
                let owner = self.owner();
                self.mknod(parent, &name, *mode, *rdev, owner).map(|_| ())
            }
            Record::HardLink { to, .. } => {
                let (to_parent, to_name) = self.parent_of(to)?;
                let ino = self.child(to_parent, &to_name)?.ok_or(Errno::ENOENT)?;
                self.link(ino, parent, &name)
            }
            Record::Owner { uid, gid, .. } => {
                let ino = self.child(parent, &name)?.ok_or(Errno::ENOENT)?;
                self.set_owner(ino, Some(*uid), Some(*gid))
            }
            Record::Times { atime, mtime, .. } => {
                let ino = self.child(parent, &name)?.ok_or(Errno::ENOENT)?;
                self.set_times(ino, Some((*atime).into()), Some((*mtime).into()))
            }
            Record::Tree {
                tree,
                size,
                perm,
                graft,
                ..
            } => {
                let dir = Dir {
                    changed: true,
                    moved: true,
                    graft: *graft,
                    ..Dir::of_base(Some((*tree, *size)))
                };
                let owner = self.owner();
                self.insert(parent, &name, *perm, owner, Kind::Dir(dir))
                    .map(|_| ())
            }
            Record::Blob {
                blob, size, perm, ..
            } => {
                let file = FileNode {
                    content: Content::Base(*blob),
                    size: *size,
                    version: 0,
                };
                let owner = self.owner();
                self.insert(parent, &name, *perm, owner, Kind::File(file))
                    .map(|_| ())
            }
            Record::Remove { .. } => {
                // Whatever is there goes (a removal was checked when it was made).
                let ino = self.child(parent, &name)?.ok_or(Errno::ENOENT)?;
                self.drop_name(parent, &name, ino)?;
                self.touch(parent);
                Ok(())
            }
            Record::Perm { perm, .. } => {
                let ino = self.child(parent, &name)?.ok_or(Errno::ENOENT)?;
                self.set_perm(ino, *perm)
            }
            Record::Base { .. } | Record::Rename { .. } => Ok(()),
        }
    }

    /// Records that rebuild the tree as it is now from `base` (just after a replay, while
    /// every directory's base is still what it was loaded with).
    pub(super) fn difference(&mut self, base: Option<TreeId>) -> Res<Vec<Record>> {
        let mut out = vec![Record::Base { tree: base }];
        let mut named = HashMap::new();
        self.difference_below(ROOT, MountPath::root(), &mut out, &mut named)?;
        self.difference_of_metadata(ROOT, MountPath::root(), &mut out);
        Ok(out)
    }

    /// The records that give the node at `path` its owner and times, where they are not
    /// what a node the snapshot has would get (after every name below a directory: making
    /// them sets its times).
    fn difference_of_metadata(&self, ino: Ino, path: MountPath, out: &mut Vec<Record>) {
        let Some(node) = self.nodes.get(&ino) else {
            return;
        };
        if ino != ROOT && (node.uid, node.gid) != (self.uid, self.gid) {
            out.push(Record::Owner {
                path: path.clone(),
                uid: node.uid,
                gid: node.gid,
            });
        }
        if ino != ROOT && (node.atime != self.base_time || node.mtime != self.base_time) {
            out.push(Record::Times {
                path,
                atime: node.atime.into(),
                mtime: node.mtime.into(),
            });
        }
    }

    /// `named`: the first path written of each node met so far (its other names are hard
    /// links to it).
    fn difference_below(
        &mut self,
        dir: Ino,
        path: MountPath,
        out: &mut Vec<Record>,
        named: &mut HashMap<Ino, MountPath>,
    ) -> Res<()> {
        let (base, loaded) = match &self.node(dir)?.kind {
            Kind::Dir(d) => (d.base, d.children.is_some()),
            _ => return Ok(()),
        };
        if !loaded {
            return Ok(());
        }
        let mut base_entries: BTreeMap<Vec<u8>, TreeEntry> = match base {
            Some((t, _)) => self
                .reader()?
                .tree(t)
                .map_err(eio)?
                .entries()
                .iter()
                .map(|e| (e.name.clone(), e.clone()))
                .collect(),
            None => BTreeMap::new(),
        };
        // What the grafts show here, as a replay shows it again, counts as the base: a
        // graft left as it is takes no record, and what was written under it is recorded
        // from its tree; so for a directory shown above a deeper graft (an empty tree here).
        let mut shown_above = HashSet::new();
        if let Some(here) = self.grafts.at(&path) {
            let grafts = here.grafts.iter().map(|(n, t)| (n, *t, false));
            let dirs = (here.dirs.iter()).map(|n| (n, Tree::default().id(), true));
            for (name, tree, above) in grafts.chain(dirs) {
                if base_entries.contains_key(name) {
                    continue;
                }
                if above {
                    shown_above.insert(name.clone());
                }
                base_entries.insert(
                    name.clone(),
                    TreeEntry {
                        name: name.clone(),
                        kind: EntryKind::Tree,
                        id: tree.into(),
                        size: 0,
                    },
                );
            }
        }
        let children: Vec<(Vec<u8>, Ino)> = self
            .children(dir)?
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        for name in base_entries.keys() {
            if !children.iter().any(|(n, _)| n == name) {
                out.push(Record::Remove {
                    path: path.join(name),
                });
            }
        }
        for (name, ino) in children {
            let at = path.join(&name);
            let be = base_entries.get(&name);
            if let Some(first) = named.get(&ino) {
                if be.is_some() {
                    out.push(Record::Remove { path: at.clone() });
                }
                out.push(Record::HardLink {
                    path: at,
                    to: first.clone(),
                });
                continue;
            }
            named.insert(ino, at.clone());
            let node = self.node(ino)?;
            let perm = node.perm;
            let default_perm = be.map(|e| perm_of(e.kind));
            // A record for what is there, unless the base has it; what differs from the
            // base's entry replaces it (the entry is removed first).
            let (record, same) = match &node.kind {
                Kind::Dir(d) => {
                    let same = match d.base {
                        Some((t, _)) => be.and_then(TreeEntry::tree) == Some(t),
                        None => shown_above.contains(&name),
                    };
                    let record = match d.base {
                        Some((tree, size)) => Record::Tree {
                            path: at.clone(),
                            tree,
                            size,
                            perm,
                            graft: d.graft,
                        },
                        None => Record::Dir {
                            path: at.clone(),
                            perm,
                        },
                    };
                    (record, same)
                }
                Kind::File(FileNode {
                    content: Content::Base(b),
                    size,
                    ..
                }) => {
                    let same = be.is_some_and(|e| {
                        matches!(e.kind, EntryKind::File | EntryKind::Executable)
                            && e.blob() == Some(*b)
                    });
                    let record = Record::Blob {
                        path: at.clone(),
                        blob: *b,
                        size: *size,
                        perm,
                    };
                    (record, same)
                }
                Kind::File(FileNode {
                    content: Content::Upper { n, .. },
                    ..
                }) => {
                    let record = Record::File {
                        path: at.clone(),
                        upper: *n,
                        perm,
                    };
                    (record, false)
                }
                Kind::Link(target) => {
                    let same = be.is_some_and(|e| {
                        e.kind == EntryKind::Symlink && e.blob() == Some(BlobId::of(target))
                    });
                    let record = Record::Link {
                        path: at.clone(),
                        target: target.clone(),
                    };
                    (record, same)
                }
                Kind::Special(s) => {
                    let record = Record::Special {
                        path: at.clone(),
                        mode: s.format | u32::from(perm),
                        rdev: s.rdev,
                    };
                    (record, false)
                }
            };
            let is_dir = matches!(node.kind, Kind::Dir(_));
            let is_link = matches!(node.kind, Kind::Link(_));
            if !same {
                if be.is_some() {
                    out.push(Record::Remove { path: at.clone() });
                }
                out.push(record);
            } else if !is_link && Some(perm) != default_perm {
                out.push(Record::Perm {
                    path: at.clone(),
                    perm,
                });
            }
            if is_dir {
                self.difference_below(ino, at.clone(), out, named)?;
            }
            self.difference_of_metadata(ino, at, out);
        }
        Ok(())
    }

    fn parent_of(&mut self, path: &MountPath) -> Res<(Ino, Vec<u8>)> {
        let mut parts: Vec<&[u8]> = path.names().collect();
        let name = parts.pop().ok_or(Errno::EINVAL)?.to_vec();
        let mut at = ROOT;
        for p in parts {
            at = self.child(at, p)?.ok_or(Errno::ENOENT)?;
        }
        Ok((at, name))
    }
}

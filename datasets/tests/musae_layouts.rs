//! The MUSAE target layouts: each graph family's header picks its id and class columns, the
//! options override them, and a column that is not there is named with the ones that are.

use std::path::Path;

use switchgnn_datasets::{load_path, LoadOptions};

/// A MUSAE folder of three vertices on a path, `target` as the target file.
fn folder(dir: &Path, name: &str, target: &str) {
    std::fs::write(dir.join(format!("{name}_target.csv")), target).unwrap();
    std::fs::write(
        dir.join(format!("{name}_edges.csv")),
        "id_1,id_2\n0,1\n1,2\n",
    )
    .unwrap();
    std::fs::write(
        dir.join(format!("{name}.json")),
        r#"{"0": [0, 2], "1": [1], "2": [2]}"#,
    )
    .unwrap();
}

/// The class name of each vertex.
fn classes(dir: &Path, options: &LoadOptions) -> Vec<String> {
    let d = load_path(dir, options).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((d.num_vertices(), d.graph.num_edges()), (3, 2));
    let labels = d.labels.expect("labels");
    let names = labels.class_names().expect("class names").to_vec();
    labels
        .values()
        .iter()
        .map(|&c| names[c as usize].clone())
        .collect()
}

#[test]
fn each_layout_is_read_from_its_header() {
    let cases = [
        // Facebook: id first, class last.
        (
            "facebook",
            "id,facebook_id,page_name,page_type\n0,145,\"A, B\",tvshow\n1,146,C,company\n2,147,D,tvshow\n",
            ["tvshow", "company", "tvshow"],
        ),
        // Twitch: the vertex is `new_id` (the last column), the class `mature`; `id` is the
        // account's own id.
        (
            "ENGB",
            "id,days,mature,views,partner,new_id\n73045350,1459,False,9528,False,2\n61573865,1629,True,3615,False,0\n171495,2300,False,100,True,1\n",
            ["True", "False", "False"],
        ),
        // GitHub: class `ml_target`, last anyway.
        (
            "git",
            "id,name,ml_target\n0,x,0\n1,y,1\n2,z,1\n",
            ["0", "1", "1"],
        ),
        // Deezer Europe.
        ("deezer_europe", "id,target\n2,1\n0,0\n1,0\n", ["0", "0", "1"]),
    ];
    for (name, target, want) in cases {
        let dir = tempfile::tempdir().unwrap();
        folder(dir.path(), name, target);
        assert_eq!(classes(dir.path(), &LoadOptions::default()), want, "{name}");
    }
}

#[test]
fn columns_named_by_the_options_win_and_missing_ones_are_named() {
    let dir = tempfile::tempdir().unwrap();
    folder(
        dir.path(),
        "custom",
        "account,vertex,team,score\na,1,red,3\nb,0,blue,1\nc,2,red,2\n",
    );
    let by_name = LoadOptions {
        id_column: Some("vertex".into()),
        label_column: Some("team".into()),
        ..LoadOptions::default()
    };
    assert_eq!(classes(dir.path(), &by_name), ["blue", "red", "red"]);
    let by_index = LoadOptions {
        id_column: Some("1".into()),
        label_column: Some("3".into()),
        ..LoadOptions::default()
    };
    assert_eq!(classes(dir.path(), &by_index), ["1", "3", "2"]);
    // The default (first column) holds no vertex ids here: the error names the field.
    let err = load_path(dir.path(), &LoadOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("custom_target.csv") && err.contains("line 2"),
        "{err}"
    );
    let missing = LoadOptions {
        id_column: Some("new_id".into()),
        ..LoadOptions::default()
    };
    let err = load_path(dir.path(), &missing).unwrap_err().to_string();
    assert!(
        err.contains("new_id") && err.contains("account, vertex, team, score"),
        "{err}"
    );
}

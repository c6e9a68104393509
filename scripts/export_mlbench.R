# Export mlbench tables (Leisch & Dimitriadou) to torchdpgmm/data/mlbench_<Name>.csv for the tabular study.
# Usage: Rscript scripts/export_mlbench.R [outdir]   (needs Debian's r-cran-mlbench)
args <- commandArgs(trailingOnly = TRUE)
out <- if (length(args) > 0) args[1] else "torchdpgmm/data"
suppressMessages(library(mlbench))
for (nm in c("Satellite", "Vowel", "Glass", "Ionosphere", "PimaIndiansDiabetes", "Sonar", "LetterRecognition")) {
  ok <- tryCatch({ do.call(data, list(nm, package = "mlbench")); TRUE }, warning = function(w) FALSE,
                 error = function(e) FALSE)
  if (!ok || !exists(nm)) { cat("not in this mlbench:", nm, "\n"); next }
  df <- get(nm)
  for (j in seq_along(df)) {  # factor features (Ionosphere V1/V2, Vowel V1) as numbers; labels stay text
    if (is.factor(df[[j]]) && j != ncol(df) && !(nm == "LetterRecognition" && j == 1))
      df[[j]] <- as.numeric(as.character(df[[j]]))
  }
  f <- file.path(out, paste0("mlbench_", nm, ".csv"))
  write.csv(df, f, row.names = FALSE)
  cat(nm, nrow(df), "rows ->", f, "\n")
}

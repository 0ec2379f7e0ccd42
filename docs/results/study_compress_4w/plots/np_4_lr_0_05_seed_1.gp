set terminal pngcairo noenhanced size 900,560 font 'DejaVu Sans,11'
set datafile missing '?'
set grid
set key bottom right
set ylabel 'test accuracy (%)'
set output 'docs/results/study_compress_4w/accuracy_vs_epoch_np_4_lr_0_05_seed_1.png'
set title 'study_compress_4w, np=4 lr=0.05 seed=1, each at its best model'
set xlabel 'epoch'
unset logscale x
plot 'docs/results/study_compress_4w/plots/np_4_lr_0_05_seed_1_0.dat' using 1:2 with linespoints lw 2 pt 1 title 'dense', \
     'docs/results/study_compress_4w/plots/np_4_lr_0_05_seed_1_1.dat' using 1:2 with linespoints lw 2 pt 2 title 'fp16_2x'
set output 'docs/results/study_compress_4w/accuracy_vs_time_np_4_lr_0_05_seed_1.png'
set title 'study_compress_4w, np=4 lr=0.05 seed=1, each at its best model'
set xlabel 'wall time (s)'
unset logscale x
plot 'docs/results/study_compress_4w/plots/np_4_lr_0_05_seed_1_0.dat' using 3:2 with linespoints lw 2 pt 1 title 'dense', \
     'docs/results/study_compress_4w/plots/np_4_lr_0_05_seed_1_1.dat' using 3:2 with linespoints lw 2 pt 2 title 'fp16_2x'
set output 'docs/results/study_compress_4w/accuracy_vs_bytes_np_4_lr_0_05_seed_1.png'
set title 'study_compress_4w, np=4 lr=0.05 seed=1, each at its best model'
set xlabel 'MB sent per worker'
unset logscale x
plot 'docs/results/study_compress_4w/plots/np_4_lr_0_05_seed_1_0.dat' using 4:2 with linespoints lw 2 pt 1 title 'dense', \
     'docs/results/study_compress_4w/plots/np_4_lr_0_05_seed_1_1.dat' using 4:2 with linespoints lw 2 pt 2 title 'fp16_2x'
